package resp

import (
	"bufio"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"raftset/internal/acl"
	"raftset/internal/command"
	"raftset/internal/respwire"
)

// nullStore answers every command with :1 and costs nothing, so that the
// benchmarks measure the front end alone.
type nullStore struct{}

func (nullStore) WriteIndexed(ctx context.Context, ops []command.Op) ([][]byte, uint64) {
	out := make([][]byte, len(ops))
	for i := range out {
		out[i] = command.One
	}
	return out, 0
}
func (nullStore) ReadBatch(ctx context.Context, cmds [][][]byte, stale bool) [][]byte {
	out := make([][]byte, len(cmds))
	for i := range out {
		out[i] = command.One
	}
	return out
}
func (nullStore) Watch(ctx context.Context, keys [][]byte) ([]command.Watch, []byte) {
	return nil, nil
}
func (nullStore) Wait(ctx context.Context, args [][]byte, index uint64) []byte { return command.Zero }
func (nullStore) Admin(ctx context.Context, args [][]byte) []byte              { return command.OK }
func (nullStore) Internal(ctx context.Context, args [][]byte) []byte           { return command.OK }
func (nullStore) Info() []InfoSection                                          { return nil }
func (nullStore) ClusterTime() time.Time                                       { return time.Now() }
func (nullStore) Users() *acl.Registry                                         { return nil }

// benchPipeline runs clients connections that each send pipelines of 10
// commands, like redis-benchmark -P 10, and reports requests per second.
func benchPipeline(b *testing.B, args []string, clients int) {
	_, addr := startServer(b, Config{Logger: hclog.NewNullLogger()}, nullStore{})
	req := []byte(strings.Repeat(enc(args...), 10))
	rounds := b.N/(clients*10) + 1
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range clients {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			r := bufio.NewReader(c)
			var reply []byte
			var err error
			for range rounds {
				if _, err = c.Write(req); err != nil {
					b.Error(err)
					return
				}
				for range 10 {
					if reply, err = respwire.ReadReply(r, reply[:0]); err != nil {
						b.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(rounds*clients*10)/time.Since(start).Seconds(), "req/s")
}

func BenchmarkPipelineWrite(b *testing.B) {
	benchPipeline(b, []string{"SADD", "000000012345", "000000054321"}, 50)
}

func BenchmarkPipelineRead(b *testing.B) {
	benchPipeline(b, []string{"SISMEMBER", "000000012345", "000000054321"}, 50)
}
