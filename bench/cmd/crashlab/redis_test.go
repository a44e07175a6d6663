package main

import (
	"encoding/binary"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// redisSynth is synth for Redis: connection 0 and 1 each acked n SETs (10
// ms apart, interleaved), and the keys read back are, per connection, the
// first keep[g] SETs, in a scan order unrelated to it.
func redisSynth(n int, keep [2]int) Trial {
	t := synth(n, 0)
	for g := range 2 {
		for seq := keep[g] - 1; seq >= 0; seq-- {
			t.Recs = append(t.Recs, Rec{LSN: uint64(len(t.Recs) + 1), Gid: uint64(g), Seq: uint64(seq), OK: true})
		}
	}
	return t
}

func hasText(list []string, sub string) bool {
	return slices.ContainsFunc(list, func(s string) bool { return strings.Contains(s, sub) })
}

func TestJudgeRedisPrefixes(t *testing.T) {
	always := redisPromise("always", 0)
	v := judgeRedis(redisSynth(5, [2]int{5, 5}), always)
	if len(v.Violations) != 0 || len(v.Beyond) != 0 || v.Acked != 10 || v.Lost != 0 || v.OldestLostAge != -1 {
		t.Fatalf("everything read back: %+v", v)
	}
	// The SET in flight at the crash (seq 5, not acknowledged) may survive.
	if v := judgeRedis(redisSynth(5, [2]int{6, 5}), always); len(v.Violations) != 0 || v.Lost != 0 {
		t.Fatalf("the in-flight SET survived: %+v", v)
	}
	// Each connection keeps its own prefix: 2 + 1 lost; the oldest lost is
	// connection 0's seq 3, acked at 60 ms, 40 ms before the crash.
	v = judgeRedis(redisSynth(5, [2]int{3, 4}), redisPromise("everysec", 0))
	if len(v.Violations) != 0 || v.Lost != 3 || v.OldestLostAge != 40*time.Millisecond || len(v.Beyond) != 0 {
		t.Fatalf("lost tails within everysec's bound: %+v", v)
	}
	// always losing anything goes beyond durawal's contract, not a violation.
	v = judgeRedis(redisSynth(5, [2]int{3, 4}), always)
	if len(v.Violations) != 0 || !hasText(v.Beyond, "3 acknowledged SETs lost") {
		t.Fatalf("always losing SETs: %+v", v)
	}
	// everysec losing a SET acknowledged 2 s before the crash goes beyond.
	tr := redisSynth(5, [2]int{0, 5})
	tr.CrashNs += int64(2 * time.Second)
	if v := judgeRedis(tr, redisPromise("everysec", 500*time.Millisecond)); !hasText(v.Beyond, "(> 1.5s)") {
		t.Fatalf("everysec losing a 2 s old SET: %+v", v)
	}
	// no promises nothing: everything lost is within it.
	if v := judgeRedis(redisSynth(5, [2]int{0, 0}), redisPromise("no", 0)); v.Lost != 10 || len(v.Beyond) != 0 || len(v.Violations) != 0 {
		t.Fatalf("no losing everything: %+v", v)
	}
}

func TestJudgeRedisImpossibleStates(t *testing.T) {
	no := redisPromise("no", 0)
	for name, c := range map[string]struct {
		edit func(*Trial)
		want string
	}{
		"a gap": {func(t *Trial) {
			t.Recs = slices.DeleteFunc(t.Recs, func(r Rec) bool { return r.Gid == 0 && r.Seq == 1 })
		}, "connection 0: a gap: seq 1 is missing but 3 later keys survived"},
		"a key never sent": {func(t *Trial) {
			t.Recs = append(t.Recs, Rec{Gid: 1, Seq: 6, OK: true})
		}, "key seq 6 recovered, but only 5 were acknowledged"},
		"a wrong value": {func(t *Trial) { t.Recs[2].OK = false }, "not what the client wrote"},
		"an unknown connection": {func(t *Trial) {
			t.Recs = append(t.Recs, Rec{Gid: 7, OK: true})
		}, "key for connection 7 of 2"},
		"no crash":        {func(t *Trial) { t.CrashNs = 0 }, "never triggered"},
		"keys unreadable": {func(t *Trial) { t.ReopenErr = "MGET: EOF" }, "reading the keys back failed"},
	} {
		tr := redisSynth(5, [2]int{5, 5})
		c.edit(&tr)
		if v := judgeRedis(tr, no); !hasText(v.Violations, c.want) {
			t.Errorf("%s: want a violation %q, got %+v", name, c.want, v.Violations)
		}
	}
}

func TestJudgeRedisRefusedAOF(t *testing.T) {
	tr := redisSynth(5, [2]int{0, 0})
	tr.OpenErr = "redis-server exited: Bad file format reading the append only file"
	v := judgeRedis(tr, redisPromise("everysec", 0))
	if v.Lost != 10 || len(v.Violations) != 0 || !hasText(v.Beyond, "did not load the surviving AOF, so all 10") {
		t.Fatalf("a refused AOF loses every ack, beyond any contract: %+v", v)
	}
}

func TestRedisKeys(t *testing.T) {
	g, seq, ok := parseRedisKey(redisKey(3, 12345))
	if !ok || g != 3 || seq != 12345 {
		t.Fatalf("round trip: %d %d %v", g, seq, ok)
	}
	for _, k := range []string{"", "k:", "k:1", "x:1:2", "k:a:2", "k:1:-2"} {
		if _, _, ok := parseRedisKey(k); ok {
			t.Errorf("%q parsed", k)
		}
	}
}

func TestParseRedisFlag(t *testing.T) {
	for in, want := range map[string][]string{"": nil, "none": nil, "all": redisWords, "no, always,no": {"no", "always"}} {
		got, err := parseRedisFlag(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	if _, err := parseRedisFlag("always,sometimes"); err == nil || !strings.Contains(err.Error(), `"sometimes"`) {
		t.Errorf("an unknown word: %v", err)
	}
}

func TestLddPaths(t *testing.T) {
	out := "\tlinux-vdso.so.1 (0x00007f39b391c000)\n" +
		"\tlibm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x00007f39b3520000)\n" +
		"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f39b2ea5000)\n" +
		"\t/lib64/ld-linux-x86-64.so.2 (0x00007f39b391e000)\n"
	got, err := lddPaths(out)
	want := []string{"/lib/x86_64-linux-gnu/libm.so.6", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %v %v, want %v", got, err, want)
	}
	if _, err := lddPaths(out + "\tliblzf.so.1 => not found\n"); err == nil || !strings.Contains(err.Error(), "liblzf.so.1 not found") {
		t.Fatalf("a missing library: %v", err)
	}
	if _, err := lddPaths("\tnot a dynamic executable\n"); err == nil {
		t.Fatal("no libraries")
	}
}

func TestRedisLoadLog(t *testing.T) {
	var l redisLogLines
	var console strings.Builder
	log := "1:C 05 Dec 2026 03:14:28.627 # Configuration loaded\n" +
		"1:M 05 Dec 2026 03:14:28.700 # !!! Warning: short read while loading the AOF file appendonly.aof.1.incr.aof!!!\n" +
		"1:M 05 Dec 2026 03:14:28.700 # !!! Truncating the AOF appendonly.aof.1.incr.aof at offset 4096 !!!\n" +
		"1:M 05 Dec 2026 03:14:28.701 # AOF appendonly.aof.1.incr.aof loaded anyway because aof-load-truncated is enabled\n" +
		"1:M 05 Dec 2026 03:14:28.702 * Ready to accept connections\n"
	l.copy(strings.NewReader(log), &console)
	if console.String() != log {
		t.Fatalf("the console gets the whole log: %q", console.String())
	}
	text := l.text()
	want := "!!! Warning: short read while loading the AOF file appendonly.aof.1.incr.aof!!! | " +
		"!!! Truncating the AOF appendonly.aof.1.incr.aof at offset 4096 !!! | " +
		"AOF appendonly.aof.1.incr.aof loaded anyway because aof-load-truncated is enabled"
	if text != want {
		t.Fatalf("kept lines:\n%s\nwant\n%s", text, want)
	}
	if got := loadOutcome(text); got != redisTruncated {
		t.Errorf("truncated: %d", got)
	}
	if got := loadOutcome("DB loaded from append only file: 0.045 seconds"); got != redisLoaded {
		t.Errorf("loaded: %d", got)
	}
	if got := loadOutcome("Creating AOF base file appendonly.aof.1.base.rdb on server start"); got != redisEmpty {
		t.Errorf("empty: %d", got)
	}
}

func TestBootPanic(t *testing.T) {
	dir := t.TempDir()
	console := dir + "/console.log"
	panicLog := "Booting from ROM...\n[    0.016000] Kernel panic - not syncing: IO-APIC + timer doesn't work!  Boot with apic=debug\n[    0.016000] CPU: 0\n"
	if err := os.WriteFile(console, []byte(panicLog), 0o644); err != nil {
		t.Fatal(err)
	}
	work := make([]byte, ackBase) // the header is all bootPanic reads
	why, ok := bootPanic(work, console)
	if !ok || !strings.Contains(why, "IO-APIC + timer doesn't work!") {
		t.Fatalf("a boot panic with the shared memory untouched: %q %v", why, ok)
	}
	started := slices.Clone(work)
	binary.LittleEndian.PutUint64(started[hdrMagic:], shmMagic)
	if _, ok := bootPanic(started, console); ok {
		t.Error("the workload had started: not a boot failure")
	}
	failed := slices.Clone(work)
	shm(failed).message("open: %v", "no space left on device")
	if _, ok := bootPanic(failed, console); ok {
		t.Error("the workload left a message: its failure is a verdict")
	}
	if err := os.WriteFile(console, []byte("Booting from ROM...\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := bootPanic(work, console); ok {
		t.Error("no panic on the console")
	}
}
