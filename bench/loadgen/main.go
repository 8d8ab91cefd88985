// Command loadgen offers a Redis-protocol server a fixed request rate and
// reports latency percentiles, which redis-benchmark (closed loop, no rate
// limit) cannot: latency at a given load is only meaningful open loop.
//
//	go run ./bench/loadgen -p 6379 -rate 20000 -c 50 -d 10s sadd __rand_int__ __rand_int__
//
// Each of -c connections sends one request at a time (pipeline 1) on its
// share of the schedule, from one event loop (loop_linux.go: epoll and a
// timerfd, so sends keep to the schedule within microseconds). A request's
// latency is measured from the time it was scheduled when the connection is
// behind schedule, so a server that falls behind is charged for the queue it
// causes (no coordinated omission), and from when it was sent otherwise (a
// late wake-up of the generator is not the server's). __rand_int__ in an
// argument is replaced by a random number below -r, as redis-benchmark does.
// Output: one line, "rate=<achieved/s> p50_us=.. p99_us=.. p999_us=.. max_us=.. n=.. errors=..".
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"time"
)

// config is what the command line asks for.
type config struct {
	addr     string
	rate     float64
	conns    int
	dur      time.Duration
	keyspace int
	args     []string
}

func main() {
	host := flag.String("h", "127.0.0.1", "server host")
	port := flag.Int("p", 6379, "server port")
	rate := flag.Float64("rate", 10000, "requests per second offered, over all connections")
	conns := flag.Int("c", 50, "connections")
	dur := flag.Duration("d", 10*time.Second, "how long to offer load")
	keyspace := flag.Int("r", 200000, "__rand_int__ is below this")
	flag.Parse()
	if flag.NArg() == 0 || *rate <= 0 || *conns <= 0 {
		fmt.Fprintln(os.Stderr, "usage: loadgen [-h host] [-p port] [-rate n] [-c n] [-d dur] [-r n] command args...")
		os.Exit(2)
	}
	cfg := config{addr: net.JoinHostPort(*host, strconv.Itoa(*port)), rate: *rate, conns: *conns,
		dur: *dur, keyspace: *keyspace, args: flag.Args()}
	lat, errs, elapsed, err := run(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
	if len(lat) == 0 {
		fmt.Fprintln(os.Stderr, "loadgen: no request completed")
		os.Exit(1)
	}
	slices.Sort(lat)
	pct := func(p float64) int64 {
		i := int(p * float64(len(lat)-1))
		return lat[i].Microseconds()
	}
	fmt.Printf("rate=%.0f p50_us=%d p99_us=%d p999_us=%d max_us=%d n=%d errors=%d\n",
		float64(len(lat))/elapsed.Seconds(), pct(0.50), pct(0.99), pct(0.999), lat[len(lat)-1].Microseconds(), len(lat), errs)
}
