// Package slot maps keys to Redis Cluster hash slots: CRC16 (XMODEM) of the
// key, or of its hash tag, modulo 16384, exactly as Redis's keyHashSlot.
//
// It is a leaf: the front end uses it to refuse commands whose keys span
// slots (-CROSSSLOT) and the node to answer CLUSTER KEYSLOT,
// COUNTKEYSINSLOT and GETKEYSINSLOT. A slot's owner (which shard, which
// node leads it) is not this package's business.
package slot
