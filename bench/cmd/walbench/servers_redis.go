package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"
)

// redisServer is one redis-server walbench starts for one appendfsync
// word, in a fresh directory: appendonly yes, save "" (no RDB snapshots),
// bound to 127.0.0.1 on a free port, everything else the distribution's
// defaults (aof-use-rdb-preamble yes, auto-aof-rewrite at 100% growth past
// 64 MiB, no I/O threads).
type redisServer struct {
	word string // appendfsync always, everysec or no
	bin  string // the redis-server binary
	dir  string // its directory: data/ and redis.log
	addr string
	proc *serverProc
	once lazyStart
	seq  int // windows measured so far (keeps keys unique)
}

// redisInstall is how the experiment tells a user to get redis-server.
const redisInstall = "apt-get install -y redis-server"

// findRedis returns the redis-server binary, or errNotInstalled.
func findRedis() (string, error) {
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("redis-server %w (%s)", errNotInstalled, redisInstall)
	}
	return p, nil
}

func (r *redisServer) name() string    { return "redis-server (appendfsync " + r.word + ")" }
func (r *redisServer) pid() int        { return r.proc.pid() }
func (r *redisServer) dataDir() string { return filepath.Join(r.dir, "data") }

// ensure starts the server on its first use and waits until it answers.
func (r *redisServer) ensure(ctx context.Context) error {
	return r.once.do(func() error { return r.start(ctx) })
}

func (r *redisServer) start(ctx context.Context) error {
	if err := os.MkdirAll(r.dataDir(), 0o755); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	r.addr = "127.0.0.1:" + strconv.Itoa(port)
	args := []string{
		"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--dir", r.dataDir(),
		"--appendonly", "yes", "--appendfsync", r.word,
		"--save", "",
		"--daemonize", "no",
		"--logfile", filepath.Join(r.dir, "redis.log"),
	}
	if r.proc, err = startProc(r.name(), r.bin, args, filepath.Join(r.dir, "stdout.log")); err != nil {
		return err
	}
	return r.proc.waitReady(ctx, 30*time.Second, func() error {
		c, err := redis.Dial("tcp", r.addr, redis.DialConnectTimeout(time.Second), redis.DialReadTimeout(time.Second))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = redis.String(c.Do("PING"))
		return err
	})
}

// open connects n clients; commit(w, seq) makes client w SET one unique
// key to the record and wait for its OK, one request in flight per client.
func (r *redisServer) open(ctx context.Context, n int, rec []byte) (commit func(ctx context.Context, w, seq int) error, closeAll func(), err error) {
	conns := make([]redis.Conn, 0, n)
	closeAll = func() {
		for _, c := range conns {
			c.Close()
		}
	}
	for range n {
		c, err := redis.Dial("tcp", r.addr, redis.DialConnectTimeout(5*time.Second),
			redis.DialReadTimeout(30*time.Second), redis.DialWriteTimeout(30*time.Second))
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("%s: %w", r.name(), err)
		}
		conns = append(conns, c)
	}
	r.seq++
	prefix := fmt.Sprintf("w%d:", r.seq)
	keys := make([][]byte, n) // one reused key buffer per client
	for i := range keys {
		keys[i] = make([]byte, 0, 32)
	}
	commit = func(ctx context.Context, w, seq int) error {
		k := append(strconv.AppendInt(append(keys[w][:0], prefix...), int64(w), 10), ':')
		k = strconv.AppendInt(k, int64(seq), 10)
		keys[w] = k
		reply, err := redis.String(redis.DoContext(conns[w], ctx, "SET", k, rec))
		if err != nil {
			return fmt.Errorf("%s: SET: %w", r.name(), err)
		}
		if reply != "OK" {
			return fmt.Errorf("%s: SET answered %q", r.name(), reply)
		}
		return nil
	}
	return commit, closeAll, nil
}

// redisCounters are the INFO persistence fields the experiment reads. Redis
// counts no fsyncs of its own: aof_delayed_fsync counts the writes
// everysec postponed past 2 s because a background fsync was still
// running; aof_rewrites the AOF rewrites (which would sync a new file);
// aof_pending_bio_fsync the fsyncs queued for the background thread.
var redisCounters = []string{"aof_delayed_fsync", "aof_rewrites", "aof_pending_bio_fsync", "aof_current_size"}

// counters reads redisCounters from INFO persistence.
func (r *redisServer) counters(ctx context.Context) (map[string]uint64, error) {
	c, err := redis.Dial("tcp", r.addr, redis.DialConnectTimeout(5*time.Second), redis.DialReadTimeout(10*time.Second))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	info, err := redis.String(redis.DoContext(c, ctx, "INFO", "persistence"))
	if err != nil {
		return nil, fmt.Errorf("%s: INFO persistence: %w", r.name(), err)
	}
	return parseRedisInfo(info, redisCounters)
}

// parseRedisInfo reads the named integer fields of an INFO reply
// ("field:value" lines); a missing or non-integer field is an error.
func parseRedisInfo(info string, fields []string) (map[string]uint64, error) {
	all := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			all[k] = v
		}
	}
	out := make(map[string]uint64, len(fields))
	for _, f := range fields {
		v, ok := all[f]
		if !ok {
			return nil, fmt.Errorf("INFO has no %s field", f)
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("INFO %s: %q is not a count", f, v)
		}
		out[f] = n
	}
	return out, nil
}

// settle waits for the background fsyncs everysec queued to finish.
func (r *redisServer) settle(ctx context.Context) error {
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := r.counters(ctx)
		if err != nil {
			return err
		}
		if c["aof_pending_bio_fsync"] == 0 || time.Now().After(deadline) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// close stops the server (SIGTERM: Redis syncs the AOF and exits).
func (r *redisServer) close() error {
	if r.proc == nil {
		return nil
	}
	return r.proc.stop(30 * time.Second)
}
