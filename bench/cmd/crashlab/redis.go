package main

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/durawal/durawal/internal/measure"
	"github.com/durawal/durawal/policy"
)

// Redis as a subject of the lab (-redis): the guest runs the distribution's
// redis-server, copied with its shared libraries into the initramfs, under
// appendfsync always, everysec or no, and the same crash and verify boots
// judge what it lost against the contract durawal keeps for the same
// setting (policy.AppendFsync). Redis's rows are reported beside durawal's;
// losing more than that contract is printed, not counted as a violation
// (it is Redis's behaviour, not the library's), while a recovered state
// that no sequence of acknowledged SETs explains is.

// redisWords are the appendfsync settings -redis all runs.
var redisWords = []string{"always", "everysec", "no"}

// RedisOutcome is the Redis-specific part of a trial's report.
type RedisOutcome struct {
	AppendFsync string
	// Load is how redis-server treated the surviving AOF on the verify
	// boot: loaded, loaded after truncating a torn tail, refused, or
	// started empty.
	Load string
	// Log holds the lines of its log about the AOF, from that boot.
	Log string
	// Beyond says how the loss exceeded durawal's contract for the same
	// setting, if it did.
	Beyond []string `json:",omitempty"`
}

// parseRedisFlag reads -redis: "", "all", or appendfsync words.
func parseRedisFlag(s string) ([]string, error) {
	switch strings.TrimSpace(s) {
	case "", "none":
		return nil, nil
	case "all":
		return redisWords, nil
	}
	var words []string
	for _, w := range strings.Split(s, ",") {
		w = strings.TrimSpace(w)
		if _, err := policy.AppendFsync(w); err != nil {
			return nil, fmt.Errorf("-redis: %v", err)
		}
		if !slices.Contains(words, w) {
			words = append(words, w)
		}
	}
	return words, nil
}

// missingRedis lists what the Redis subject needs and this machine lacks.
func missingRedis() []string {
	var missing []string
	if _, err := exec.LookPath("redis-server"); err != nil {
		missing = append(missing, "redis-server (apt-get install -y redis-server)")
	}
	if _, err := exec.LookPath("ldd"); err != nil {
		missing = append(missing, "ldd (libc-bin)")
	}
	return missing
}

// addRedis copies redis-server and every shared library ldd says it loads
// (the dynamic loader included) into the initramfs at root, each at the
// path the binary will look for it, and returns the server's version.
func addRedis(root string) (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return "", err
	}
	out, err := run("", "ldd", real)
	if err != nil {
		return "", err
	}
	libs, err := lddPaths(string(out))
	if err != nil {
		return "", err
	}
	for _, p := range append([]string{guestRedisBin}, libs...) {
		src := p
		if p == guestRedisBin {
			src = real
		}
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			return "", err
		}
		if err := copyFile(src, filepath.Join(root, p), 0o755); err != nil {
			return "", err
		}
	}
	v, err := run("", bin, "--version") // by its own name: the binary behaves as the name it is run by
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(v)), nil
}

// lddPaths reads ldd's output: the absolute path of every library it
// resolved, and the loader's; a library it could not find is an error.
func lddPaths(out string) ([]string, error) {
	var paths []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[1] == "=>" && f[2] == "not":
			return nil, fmt.Errorf("ldd: %s not found", f[0])
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			paths = append(paths, f[2])
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			paths = append(paths, f[0])
		}
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("ldd listed no libraries: %q", out)
	}
	return paths, nil
}

// redisRowName is the table's name for Redis under word.
func redisRowName(word string) string { return "Redis appendfsync " + word }

// redisPromise is the contract durawal keeps for appendfsync word.
func redisPromise(word string, slack time.Duration) Promise {
	p, _ := policy.AppendFsync(word)
	return promiseOf(p, slack)
}

// redisTrial is one Redis trial: fresh disk, crash boot, verify boot, judge.
func (l *lab) redisTrial(word string, i int) TrialReport {
	name := redisRowName(word)
	r := TrialReport{Policy: name, Trial: i, OldestLostAge: -1, Redis: &RedisOutcome{AppendFsync: word}}
	fail := func(format string, a ...any) TrialReport {
		r.Violations = append(r.Violations, fmt.Sprintf(format, a...))
		return r
	}
	dir := filepath.Join(l.c.work, fmt.Sprintf("trial-redis-%s-%d", word, i))
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail("%v", err)
	}
	img := filepath.Join(dir, "disk.img")
	if err := mkDisk(img, false); err != nil {
		return fail("mkfs: %v", err)
	}
	shmPath := fmt.Sprintf("/dev/shm/crashlab-%d-redis-%s-%d", os.Getpid(), word, i)
	defer os.Remove(shmPath)
	if err := os.WriteFile(shmPath, make([]byte, shmSize), 0o600); err != nil {
		return fail("%v", err)
	}
	span := max(l.c.maxDelay-l.c.minDelay, time.Millisecond)
	r.DelayMs = int((l.c.minDelay + rand.N(span)) / time.Millisecond)
	r.Lull = i%2 == 1
	lull := 0
	if r.Lull {
		lull = 1
	}
	crashConsole := filepath.Join(dir, "console-crash.log")
	t1, err := l.boot(l.accel, img, "", shmPath, fmt.Sprintf("cl.mode=redis-work cl.appendfsync=%s cl.delayms=%d cl.lull=%d", word, r.DelayMs, lull),
		crashConsole, l.c.timeout)
	if err != nil {
		return r.hung("crash boot", err, fail)
	}
	work, err := os.ReadFile(shmPath)
	if err != nil {
		return fail("%v", err)
	}
	os.WriteFile(filepath.Join(dir, "shm-crash.bin"), work, 0o644)
	if binary.LittleEndian.Uint64(work[hdrMagic:]) != shmMagic {
		if why, ok := bootPanic(work, crashConsole); ok {
			r.LabFailure = why
			return r
		}
		return fail("the workload never started (console: %s): %s", crashConsole, msg(work))
	}
	if err := os.WriteFile(shmPath, make([]byte, shmSize), 0o600); err != nil {
		return fail("%v", err)
	}
	verifyConsole := filepath.Join(dir, "console-verify.log")
	t2, err := l.boot(l.accel, img, "", shmPath, "cl.mode=redis-verify cl.appendfsync="+word, verifyConsole, l.c.timeout)
	r.BootSeconds = (t1 + t2).Seconds()
	if err != nil {
		return r.hung("verify boot", err, fail)
	}
	ver, err := os.ReadFile(shmPath)
	if err != nil {
		return fail("%v", err)
	}
	os.WriteFile(filepath.Join(dir, "shm-verify.bin"), ver, 0o644)
	if u64(ver, hdrVerify) == 0 {
		return fail("the verify boot reported nothing (console: %s): %s", verifyConsole, msg(ver))
	}
	if m := msg(work); m != "" {
		r.Violations = append(r.Violations, "workload: "+m)
	}
	t := decode(name, work, ver)
	r.Redis.Load = redisLoadName(u64(ver, hdrRedisLoad))
	r.Redis.Log = msg(ver)
	v := judgeRedis(t, redisPromise(word, l.c.slack))
	r.Acked, r.Lost, r.OldestLostAge, r.Recovered = v.Acked, v.Lost, v.OldestLostAge, len(t.Recs)
	r.Violations = append(r.Violations, v.Violations...)
	r.Redis.Beyond = v.Beyond
	return r
}

// redisLoadName names a verify boot outcome (hdrRedisLoad).
func redisLoadName(code uint64) string {
	switch code {
	case redisLoaded:
		return "loaded"
	case redisTruncated:
		return "truncated a torn tail, loaded"
	case redisRefused:
		return "refused to start"
	case redisEmpty:
		return "no AOF: started empty"
	}
	return "unknown"
}

// RedisVerdict is judgeRedis's finding: the lab's Verdict, and how the
// loss went beyond durawal's contract for the same setting.
type RedisVerdict struct {
	Verdict
	Beyond []string
}

// judgeRedis judges a Redis trial. Redis's AOF is one log in execution
// order and each connection waited for every reply, so what a surviving AOF
// restores is, per connection, its SETs from the first up to some point,
// plus at most the one SET in flight at the crash. Anything else (a gap, a
// key never sent, a value that is not the one written) is a violation; keys
// lost are counted per connection and their age taken from the ack times,
// and a loss beyond p is reported in Beyond.
func judgeRedis(t Trial, p Promise) RedisVerdict {
	v := RedisVerdict{Verdict: Verdict{OldestLostAge: -1}}
	viol := func(format string, a ...any) { v.Violations = append(v.Violations, fmt.Sprintf(format, a...)) }
	for _, n := range t.AckCounts {
		v.Acked += n
	}
	if t.CrashNs == 0 {
		viol("the crash was never triggered (no crash time in shared memory)")
	}
	recovered := make([]uint64, len(t.AckCounts))
	if t.OpenErr != "" {
		v.Lost = v.Acked // nothing can be read until someone repairs the AOF
	} else {
		if t.ReopenErr != "" {
			viol("reading the keys back failed: %s", t.ReopenErr)
		}
		seen := make([]map[uint64]bool, len(t.AckCounts))
		for g := range seen {
			seen[g] = map[uint64]bool{}
		}
		for _, r := range t.Recs {
			switch {
			case !r.OK:
				viol("a key whose name or value is not what the client wrote (record %d: gid %d seq %d)", r.LSN, r.Gid, r.Seq)
			case r.Gid >= uint64(len(seen)):
				viol("key for connection %d of %d", r.Gid, len(seen))
			case r.Seq > t.AckCounts[r.Gid]:
				viol("connection %d: key seq %d recovered, but only %d were acknowledged and one more was in flight", r.Gid, r.Seq, t.AckCounts[r.Gid])
			default:
				seen[r.Gid][r.Seq] = true
			}
		}
		for g, s := range seen {
			for recovered[g] = 0; s[recovered[g]]; recovered[g]++ {
			}
			if len(s) > int(recovered[g]) {
				viol("connection %d: a gap: seq %d is missing but %d later keys survived", g, recovered[g], len(s)-int(recovered[g]))
			}
		}
		for g, n := range t.AckCounts {
			if recovered[g] < n {
				v.Lost += n - recovered[g]
			}
		}
	}
	var lost []Ack
	for _, a := range t.Acks {
		if a.Gid < uint64(len(recovered)) && a.Seq >= recovered[a.Gid] {
			lost = append(lost, a)
		}
	}
	slices.SortFunc(lost, func(a, b Ack) int { return int(a.TimeNs - b.TimeNs) })
	if len(lost) > 0 && t.CrashNs != 0 {
		v.OldestLostAge = time.Duration(t.CrashNs - lost[0].TimeNs)
	}
	if uint64(len(lost)) < v.Lost {
		viol("%d lost acks are older than the published ring tail (ages unknown)", v.Lost-uint64(len(lost)))
	}
	beyond := func(format string, a ...any) { v.Beyond = append(v.Beyond, fmt.Sprintf(format, a...)) }
	switch {
	case t.OpenErr != "" && v.Acked > 0:
		beyond("redis-server did not load the surviving AOF, so all %d acknowledged SETs are unreadable until it is repaired", v.Acked)
	case p.Nothing && v.Lost > 0:
		beyond("%d acknowledged SETs lost, the oldest acknowledged %s before the crash:%s", v.Lost, v.OldestLostAge.Round(time.Millisecond), describe(lost, t.CrashNs))
	case p.MaxAge > 0 && v.OldestLostAge > p.MaxAge:
		beyond("a lost SET was acknowledged %s before the crash (> %s):%s", v.OldestLostAge.Round(time.Millisecond), p.MaxAge, describe(lost, t.CrashNs))
	}
	return v
}

// runRedis runs every Redis trial of the configuration, printing a line
// per trial as hostMain does, and reports whether any had a violation or
// hung three times.
func (l *lab) runRedis(out *os.File) (reports []TrialReport, bad, labFailed bool) {
	for _, word := range l.c.redis {
		for i := range l.c.trials {
			r := l.redisTrial(word, i)
			for again := 0; r.LabFailure != "" && again < 2; again++ {
				fmt.Fprintf(out, "%s trial %d: the lab failed (%s); running it again\n", r.Policy, i, r.LabFailure)
				r = l.redisTrial(word, i)
			}
			labFailed = labFailed || r.LabFailure != ""
			status := "ok"
			if len(r.Violations) > 0 {
				bad, status = true, "VIOLATION"
			} else if len(r.Redis.Beyond) > 0 {
				status = "lost more than durawal's contract for the setting"
			}
			when := "amid commits"
			if r.Lull {
				when = "in a lull"
			}
			fmt.Fprintf(out, "%s trial %d: %s, crash %s after %d ms, acked %d, lost %d, keys read back %d, AOF: %s, %.0f s\n",
				r.Policy, i, status, when, r.DelayMs, r.Acked, r.Lost, r.Recovered, r.Redis.Load, r.BootSeconds)
			for _, s := range append(slices.Clone(r.Violations), r.Redis.Beyond...) {
				fmt.Fprintf(out, "    %s\n", s)
			}
			if r.Redis.Log != "" {
				fmt.Fprintf(out, "    redis-server on restart: %s\n", r.Redis.Log)
			}
			reports = append(reports, r)
		}
	}
	return reports, bad, labFailed
}

// redisTable prints Redis's rows beside durawal's for the same setting:
// the policy policy.AppendFsync builds for the word, when it ran.
func redisTable(c config, version string, rs []TrialReport) string {
	t := measure.NewTable("subject", "appendfsync", "trials", "acked (total)", "lost min / median / max", "oldest lost ack age",
		"on restart", "contract (durawal's, same setting)", "trials beyond it", "violations")
	for _, word := range c.redis {
		pol, _ := policy.AppendFsync(word)
		promise := redisPromise(word, c.slack).Text
		var redisRows []TrialReport
		for _, r := range rs {
			if r.Redis != nil && r.Redis.AppendFsync == word {
				redisRows = append(redisRows, r)
			}
		}
		loads := map[string]int{}
		beyond := 0
		for _, r := range redisRows {
			loads[r.Redis.Load]++
			if len(r.Redis.Beyond) > 0 {
				beyond++
			}
		}
		var restart []string
		for _, k := range []string{redisLoadName(redisLoaded), redisLoadName(redisTruncated), redisLoadName(redisRefused), redisLoadName(redisEmpty), "unknown"} {
			if loads[k] > 0 {
				restart = append(restart, fmt.Sprintf("%s %d", k, loads[k]))
			}
		}
		n, acked, lost, age, viol := summarize(redisRows)
		t.Row("Redis", word, n, measure.Thousands(int64(acked)), lost, age, strings.Join(restart, ", "), promise, beyond, viol)
		for _, p := range c.policies {
			if p.Build().String() != pol.String() || p.Method.String() != "fdatasync" || p.SegSize != defaultSegSize {
				continue
			}
			var durawalRows []TrialReport
			for _, r := range rs {
				if r.Policy == p.Name && r.Redis == nil {
					durawalRows = append(durawalRows, r)
				}
			}
			n, acked, lost, age, viol := summarize(durawalRows)
			t.Row("durawal "+p.Name, word, n, measure.Thousands(int64(acked)), lost, age, "recovered", promise, "—", viol)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Redis beside durawal (%s, in the guest; durawal rows are those of this run whose policy is policy.AppendFsync's for the word):\n\n", version)
	t.Fprint(&b)
	return b.String()
}

// summarize gives a group of trials' count, total acks, lost min / median
// / max and the oldest lost ack's age, as the lab's table shows them, and
// their violations.
func summarize(rs []TrialReport) (n int, acked uint64, lost, age string, viol int) {
	var losts []uint64
	oldest := time.Duration(-1)
	for _, r := range rs {
		n++
		acked += r.Acked
		losts = append(losts, r.Lost)
		oldest = max(oldest, r.OldestLostAge)
		viol += len(r.Violations)
	}
	slices.Sort(losts)
	lost, age = "—", "—"
	if len(losts) > 0 {
		lost = fmt.Sprintf("%d / %d / %d", losts[0], losts[len(losts)/2], losts[len(losts)-1])
	}
	if oldest >= 0 {
		age = oldest.Round(time.Millisecond).String()
	}
	return n, acked, lost, age, viol
}
