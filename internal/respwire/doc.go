// Package respwire reads and writes RESP on the client side of a
// connection: one reader that takes a complete reply off the wire as its
// raw bytes (so callers can relay it or compare it byte for byte), a parser
// that turns those bytes into a Reply tree, and a small Client that never
// retries. Everything in raftset that talks RESP *to* a server uses it:
// cluster forwarding, the healthcheck, CONFIG's view of a store reply, and
// every test helper. The server side (parsing commands) is resp's.
//
// It reads RESP2 and RESP3 reply types. Lengths are bounded by a Limits
// value so that a hostile or broken peer cannot make the reader allocate
// without bound.
package respwire
