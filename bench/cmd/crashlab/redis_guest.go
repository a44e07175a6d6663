package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The Redis subject's guest side. The work boot starts redis-server on the
// guest's disk under one appendfsync word, and the lab's client sets keys
// from several connections, publishing each acknowledged SET through the
// same ack rings as the durawal workload (LSN 0: Redis names no position);
// then the guest crashes itself. The verify boot starts redis-server on
// whatever AOF survived, reports how it loaded, and publishes every key it
// reads back as a verify record.

const (
	// guestRedisBin is where the initramfs holds redis-server.
	guestRedisBin = "/usr/bin/redis-server"
	// guestRedisDir is the server's directory on the guest's disk.
	guestRedisDir = "/mnt/redis"
	// guestRedisSock is the server's Unix socket (the guest has no network).
	guestRedisSock = "/run/redis.sock"
	// redisStartLimit is how long the emulated guest waits for Redis to
	// answer (its start, or its load of the AOF).
	redisStartLimit = 2 * time.Minute
)

// Verify boot outcomes, in the header word hdrRedisLoad (in the header's
// unused space, past the words the durawal workload uses).
const (
	hdrRedisLoad = 512

	redisLoaded    = 1 // started and loaded the AOF, reporting no damage
	redisTruncated = 2 // loaded after cutting a torn tail (aof-load-truncated yes)
	redisRefused   = 3 // exited instead of serving: the AOF did not load
	redisEmpty     = 4 // found no AOF and started empty
)

// redisKey is the key of goroutine g's record seq.
func redisKey(g, seq uint64) string {
	return "k:" + strconv.FormatUint(g, 10) + ":" + strconv.FormatUint(seq, 10)
}

// parseRedisKey is redisKey's inverse.
func parseRedisKey(k string) (g, seq uint64, ok bool) {
	rest, found := strings.CutPrefix(k, "k:")
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(rest, ":")
	if !found {
		return 0, 0, false
	}
	g, err1 := strconv.ParseUint(a, 10, 64)
	seq, err2 := strconv.ParseUint(b, 10, 64)
	return g, seq, err1 == nil && err2 == nil
}

// guestRedis starts redis-server on guestRedisDir with appendonly yes under
// word, save "" and a Unix socket only; its log goes to out.
func guestRedis(word string, out io.Writer) (*exec.Cmd, error) {
	if err := os.MkdirAll(guestRedisDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll("/run", 0o755); err != nil {
		return nil, err
	}
	cmd := exec.Command(guestRedisBin,
		"--dir", guestRedisDir, "--appendonly", "yes", "--appendfsync", word, "--save", "",
		"--port", "0", "--unixsocket", guestRedisSock, "--daemonize", "no", "--logfile", "")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// waitRedis waits until the server answers PING (not LOADING), or exits.
func waitRedis(exited <-chan struct{}) error {
	deadline := time.Now().Add(redisStartLimit)
	for {
		c, err := dialRedis(guestRedisSock)
		if err == nil {
			_, err = replyString(c.do("PING"))
			c.close()
			if err == nil {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("redis-server exited")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server did not answer within %s: %v", redisStartLimit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// redisWork is the work boot of the Redis subject.
func redisWork(m shm, args map[string]string) error {
	word := args["appendfsync"]
	delay, _ := strconv.Atoi(args["delayms"])
	cmd, err := guestRedis(word, os.Stdout)
	if err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	if err := waitRedis(exited); err != nil {
		return err
	}
	m.store(hdrGorout, goroutines)
	m.store(hdrStartNs, uint64(time.Now().UnixNano()))
	m.store(hdrMagic, shmMagic)
	m.store(hdrPhase, phaseWorking)
	rs, capacity := regionSize(goroutines), uint64(ringCap(goroutines))
	var pause atomic.Bool
	var idle sync.WaitGroup
	idle.Add(goroutines)
	for g := range goroutines {
		go func() {
			defer idle.Done()
			c, err := dialRedis(guestRedisSock)
			if err != nil {
				m.message("connect gid %d: %v", g, err)
				return
			}
			base := ackBase + g*rs
			b := make([]byte, payloadLen)
			for seq := uint64(0); ; seq++ {
				if pause.Load() {
					return
				}
				payload(b, uint64(g), seq, time.Now().UnixNano())
				if reply, err := replyString(c.do("SET", redisKey(uint64(g), seq), b)); err != nil || reply != "OK" {
					m.message("SET gid %d seq %d: %q %v", g, seq, reply, err)
					return
				}
				e := base + entryBase + int(seq%capacity)*32
				m.store(e, 0)
				m.store(e+8, seq)
				m.store(e+16, uint64(time.Now().UnixNano()))
				m.store(e+24, uint64(g))
				m.store(base, seq+1) // published: seq acknowledged
				if seq+1 >= min(capacity, recMax/goroutines)*9/10 {
					return
				}
			}
		}()
	}
	time.Sleep(time.Duration(delay) * time.Millisecond)
	if args["lull"] == "1" {
		pause.Store(true)
		done := make(chan struct{})
		go func() { idle.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
		time.Sleep(time.Millisecond)
	}
	m.store(hdrCrashNs, uint64(time.Now().UnixNano()))
	m.store(hdrPhase, phaseCrashed)
	if err := os.WriteFile("/proc/sys/kernel/sysrq", []byte("1"), 0); err != nil {
		return err
	}
	err = os.WriteFile("/proc/sysrq-trigger", []byte("c"), 0)
	return fmt.Errorf("the kernel survived sysrq-c: %v", err)
}

// redisLogLines keeps the lines of Redis's log that say how the AOF was
// found and loaded.
type redisLogLines struct {
	mu    sync.Mutex
	lines []string
}

// keepRedisLine reports whether a log line says how the AOF was found
// and loaded: the totals, a torn tail cut off, a refusal, a fresh start.
func keepRedisLine(line string) bool {
	for _, s := range []string{"DB loaded from append only file", "short read", "Truncat", "loaded anyway", "Bad file format",
		"Unrecoverable", "manifest", "Fatal", "Creating AOF base file"} {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// copy tees r (Redis's log) to w and keeps the lines about the AOF.
func (l *redisLogLines) copy(r io.Reader, w io.Writer) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(w, line)
		if keepRedisLine(line) {
			l.mu.Lock()
			l.lines = append(l.lines, line)
			l.mu.Unlock()
		}
	}
}

// redisLogPrefix is what Redis puts before each message: "pid:role date
// time level ".
var redisLogPrefix = regexp.MustCompile(`^\d+:[A-Z] \d+ \w+ \d+ [\d:.]+ [.*#-] `)

// text returns the kept lines without their prefixes, joined by " | ".
func (l *redisLogLines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, len(l.lines))
	for i, line := range l.lines {
		out[i] = redisLogPrefix.ReplaceAllString(line, "")
	}
	return strings.Join(out, " | ")
}

// loadOutcome classifies how redis-server treated the surviving AOF from
// its log.
func loadOutcome(log string) int {
	switch {
	case strings.Contains(log, "loaded anyway because aof-load-truncated is enabled"):
		return redisTruncated
	case strings.Contains(log, "Creating AOF base file") && !strings.Contains(log, "loaded"):
		return redisEmpty
	}
	return redisLoaded
}

// redisVerify is the verify boot of the Redis subject.
func redisVerify(m shm, args map[string]string) error {
	m.store(hdrPhase, phaseVerify)
	pr, pw := io.Pipe()
	var log redisLogLines
	copied := make(chan struct{})
	go func() { log.copy(pr, os.Stdout); close(copied) }()
	cmd, err := guestRedis(args["appendfsync"], pw)
	if err != nil {
		m.store(hdrVerify, 2)
		m.message("starting redis-server: %v", err)
		return nil
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); pw.Close(); close(exited) }()
	if err := waitRedis(exited); err != nil {
		<-exited
		<-copied
		m.store(hdrVerify, 2)
		m.store(hdrRedisLoad, redisRefused)
		m.message("%v: %s", err, log.text())
		return nil
	}
	m.store(hdrRedisLoad, uint64(loadOutcome(log.text())))
	m.store(hdrVerify, 1)
	n, err := readRedisKeys(m)
	m.store(hdrNRecs, uint64(n))
	m.message("%s", log.text())
	if err != nil {
		m.store(hdrReopen, 2)
		m.message("reading the keys back: %v; %s", err, log.text())
		return nil
	}
	m.store(hdrReopen, 1)
	return nil
}

// readRedisKeys reads every key back (SCAN, then MGET in batches) and
// publishes each as a verify record: its position in the scan as the LSN,
// the goroutine and sequence number its key names, and whether its value
// is the payload that goroutine wrote for it.
func readRedisKeys(m shm) (int, error) {
	c, err := dialRedis(guestRedisSock)
	if err != nil {
		return 0, err
	}
	defer c.close()
	var keys []string
	for cursor := "0"; ; {
		reply, err := c.do("SCAN", cursor, "COUNT", 1000)
		if err != nil {
			return 0, fmt.Errorf("SCAN: %w", err)
		}
		v, ok := reply.([]any)
		if !ok || len(v) != 2 {
			return 0, fmt.Errorf("SCAN answered %v", reply)
		}
		if cursor, err = replyString(v[0], nil); err != nil {
			return 0, fmt.Errorf("SCAN cursor: %w", err)
		}
		batch, _ := v[1].([]any)
		for _, k := range batch {
			key, err := replyString(k, nil)
			if err != nil {
				return 0, fmt.Errorf("SCAN key: %w", err)
			}
			keys = append(keys, key)
		}
		if cursor == "0" {
			break
		}
	}
	n := 0
	for start := 0; start < len(keys); start += 500 {
		batch := keys[start:min(start+500, len(keys))]
		args := make([]any, len(batch))
		for i, k := range batch {
			args[i] = k
		}
		reply, err := c.do(append([]any{"MGET"}, args...)...)
		if err != nil {
			return n, fmt.Errorf("MGET: %w", err)
		}
		vals, ok := reply.([]any)
		if !ok || len(vals) != len(batch) {
			return n, fmt.Errorf("MGET of %d keys answered %v", len(batch), reply)
		}
		for i, k := range batch {
			if n >= recMax {
				return n, nil
			}
			g, seq, ok := parseRedisKey(k)
			val, _ := vals[i].([]byte) // nil: the key vanished
			vg, vseq, vok := checkPayload(val)
			ok = ok && vok && vg == g && vseq == seq
			e := recBase + n*32
			m.store(e, uint64(n+1))
			m.store(e+8, g)
			m.store(e+16, seq)
			okw := uint64(0)
			if ok {
				okw = 1
			}
			m.store(e+24, okw)
			n++
		}
	}
	return n, nil
}
