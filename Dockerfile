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
# A single node listening on every interface of the container; docker-compose.yml
# replaces this with a 3-node cluster's flags. Without a password, protected
# mode (on by default) refuses every client not on the container's loopback
# with Redis's -DENIED error, so the port is never open to anyone: add
# --requirepass to serve clients from outside (or --protected-mode no on a
# network you trust). The healthcheck probes loopback and needs no password;
# give it RAFTSET_HEALTH_PASSWORD once one is set.
CMD ["--bind", "0.0.0.0", "--port", "6379", "--dir", "/data"]
