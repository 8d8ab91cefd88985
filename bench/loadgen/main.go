// Command loadgen offers a Redis-protocol server a fixed request rate and
// reports latency percentiles, which redis-benchmark (closed loop, no rate
// limit) cannot: latency at a given load is only meaningful open loop.
//
//	go run ./bench/loadgen -p 6379 -rate 20000 -c 50 -d 10s sadd __rand_int__ __rand_int__
//
// Each of -c connections sends one request at a time (pipeline 1) on its
// share of the schedule. A request's latency is measured from the time it
// was scheduled when the connection is behind schedule, so a server that
// falls behind is charged for the queue it causes (no coordinated
// omission), and from when it was sent otherwise (a late wake-up of the
// generator is not the server's). __rand_int__ in an
// argument is replaced by a random number below -r, as redis-benchmark does.
// Output: one line, "rate=<achieved/s> p50_us=.. p99_us=.. p999_us=.. max_us=.. n=.. errors=..".
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"raftset/internal/respwire"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

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
	addr := net.JoinHostPort(*host, strconv.Itoa(*port))
	interval := time.Duration(float64(*conns) / *rate * float64(time.Second))
	start := time.Now().Add(50 * time.Millisecond)
	end := start.Add(*dur)

	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	var wg sync.WaitGroup
	for i := range *conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			fmt.Fprintf(os.Stderr, "loadgen: %v\n", err)
			os.Exit(1)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			r, w := bufio.NewReader(c), bufio.NewWriter(c)
			rng := rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano())))
			var mine []time.Duration
			myErrs := 0
			// Connections start staggered across one interval.
			next := start.Add(interval * time.Duration(i) / time.Duration(*conns))
			for ; next.Before(end); next = next.Add(interval) {
				// Behind schedule (the last reply came late), the wait
				// counts; ahead of it, the sleep's own overshoot does not.
				from := next
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
					from = time.Now()
				}
				writeCommand(w, flag.Args(), rng, *keyspace)
				if err := w.Flush(); err != nil {
					myErrs++
					break
				}
				if err := readReply(r); err != nil {
					myErrs++
					if _, ok := err.(serverError); !ok {
						break
					}
				}
				mine = append(mine, time.Since(from))
			}
			mu.Lock()
			lat = append(lat, mine...)
			errs += myErrs
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
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

func writeCommand(w *bufio.Writer, args []string, rng *rand.Rand, keyspace int) {
	fmt.Fprintf(w, "*%d\r\n", len(args))
	for _, a := range args {
		if strings.Contains(a, "__rand_int__") {
			a = strings.ReplaceAll(a, "__rand_int__", fmt.Sprintf("%012d", rng.IntN(keyspace)))
		}
		fmt.Fprintf(w, "$%d\r\n%s\r\n", len(a), a)
	}
}

type serverError string

func (e serverError) Error() string { return string(e) }

// readReply reads one reply; an error reply is a serverError.
func readReply(r *bufio.Reader) error {
	raw, err := respwire.ReadReply(r, nil)
	if err != nil {
		return err
	}
	if raw[0] == '-' {
		return serverError(strings.TrimSuffix(string(raw[1:]), "\r\n"))
	}
	return nil
}
