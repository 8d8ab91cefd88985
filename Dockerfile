# raftset image: FROM scratch around a static binary built on the host
# (`make image` builds bin/raftset with CGO_ENABLED=0 and then this image);
# no base image is pulled.
FROM scratch
COPY bin/raftset /raftset
# Raft log, stable store, snapshots and node-id.
VOLUME /data
WORKDIR /data
# 6379: clients (RESP). 16379: Raft.
EXPOSE 6379 16379
# What `raftset healthcheck` probes; change it if --port/--bind differ.
ENV RAFTSET_HEALTH_ADDR=127.0.0.1:6379
HEALTHCHECK --interval=5s --timeout=3s --start-period=15s --retries=3 \
  CMD ["/raftset", "healthcheck"]
ENTRYPOINT ["/raftset"]
# A single node reachable from outside the container; docker-compose.yml
# replaces this with a 3-node cluster's flags.
CMD ["--bind", "0.0.0.0", "--port", "6379", "--dir", "/data"]
