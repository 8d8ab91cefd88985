"""Drives redis-py's Sentinel client for TestPythonSentinelClient.

Usage: sentinel_client.py MASTER_NAME HOST:PORT [HOST:PORT ...]
Reads one request per line on stdin and answers one line on stdout:
  version            redis-py's version
  discover           the master's address (discover_master), or "error: ..."
  slaves             the replicas' addresses, sorted, comma-separated (discover_slaves)
  write KEY MEMBER   SADD through master_for; the reply, or "error: ..."
  read KEY           SMEMBERS through slave_for, sorted, comma-separated, or "error: ..."
  role               ROLE's first element through master_for
"""
import sys

import redis
from redis.sentinel import Sentinel


def main():
    name = sys.argv[1]
    sentinels = []
    for a in sys.argv[2:]:
        host, port = a.rsplit(":", 1)
        sentinels.append((host, int(port)))
    s = Sentinel(sentinels, socket_timeout=2, socket_connect_timeout=1)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        try:
            if words[0] == "version":
                out = redis.__version__
            elif words[0] == "discover":
                host, port = s.discover_master(name)
                out = "%s:%d" % (host, port)
            elif words[0] == "slaves":
                out = ",".join(sorted("%s:%d" % hp for hp in s.discover_slaves(name)))
            elif words[0] == "write":
                # A fresh client each time: it asks the sentinels again.
                out = str(s.master_for(name, socket_timeout=2).sadd(words[1], words[2]))
            elif words[0] == "read":
                members = s.slave_for(name, socket_timeout=2).smembers(words[1])
                out = ",".join(sorted(m.decode() for m in members))
            elif words[0] == "role":
                out = s.master_for(name, socket_timeout=2).execute_command("ROLE")[0].decode()
            else:
                out = "error: unknown request " + words[0]
        except Exception as e:  # the Go test reports it
            out = "error: %s: %s" % (type(e).__name__, str(e).replace("\n", " "))
        sys.stdout.write(out + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
