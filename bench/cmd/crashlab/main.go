// Command crashlab crashes a real Linux kernel (under QEMU) beneath a durawal
// log and reports what each policy lost: a guest commits from several
// goroutines and publishes every acknowledged commit through ivshmem shared
// memory (which survives the guest), triggers a kernel crash (sysrq-c), and a
// second boot on the same disk image recovers the log and reports what it
// read. The host judges each trial against the policy's promise. With
// -power-loss the crash boot's block writes are recorded and the disk
// states a power loss could leave are judged too (powerloss.go).
//
//	go run ./bench/cmd/crashlab -trials 2
//	go run ./bench/cmd/crashlab -negative broken -policies SyncEveryCommit   # negative control: must fail
//	go run ./bench/cmd/crashlab -power-loss 150   # also judge 150 power-loss disk states per trial
//
// Exit status: 0 all trials kept their promises, 1 violations, 2 missing tools.
package main

import (
	"bytes"
	"cmp"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/durawal/durawal/internal/measure"
	"github.com/durawal/durawal/wal/vfs"
)

func main() {
	if os.Getpid() == 1 || os.Getenv("CRASHLAB_GUEST") == "1" {
		guestMain()
		return
	}
	os.Exit(hostMain(os.Args[1:], os.Stdout))
}

type config struct {
	trials         int
	policies       []labPolicy
	jsonOut        string
	work           string
	slack          time.Duration
	minDelay       time.Duration
	maxDelay       time.Duration
	timeout        time.Duration
	accel          string
	redis          []string // appendfsync words Redis runs under (-redis)
	negative       string   // the negative control the guest's log runs on (-negative), or ""
	powerLoss      int      // power-loss states judged per trial (-power-loss), 0 for none
	seed           uint64   // the power-loss states' seed (-seed)
	powerLossBoots int      // power-loss states per trial also judged by a verify boot (-power-loss-boots)
}

// TrialReport is one trial in the -json output.
type TrialReport struct {
	Policy        string
	Trial         int
	Broken        string // the negative control (-negative), empty for the real library
	DelayMs       int
	Lull          bool   // the committers were stopped, each after its last ack, 1 ms before the crash
	LabFailure    string // the emulated guest hung: no verdict, the trial is run again
	Acked, Lost   uint64
	OldestLostAge time.Duration
	Recovered     int
	Violations    []string
	BootSeconds   float64
	Redis         *RedisOutcome     `json:",omitempty"` // a Redis trial (-redis)
	PowerLoss     *PowerLossOutcome `json:",omitempty"` // the power-loss states (-power-loss)
}

func hostMain(argv []string, out *os.File) int {
	fs := flag.NewFlagSet("crashlab", flag.ContinueOnError)
	var c config
	var pols string
	fs.IntVar(&c.trials, "trials", 2, "trials (crash + verify boot) per policy")
	fs.StringVar(&pols, "policies", "all", "comma-separated policies (names as in the table, parameters optional), all, or none")
	redisList := fs.String("redis", "", "also crash redis-server (the installed one, copied into the guest) under these appendfsync words (always,everysec,no), or all")
	fs.StringVar(&c.jsonOut, "json", "", "write every trial's result to this JSON file")
	fs.StringVar(&c.work, "work", "", "work directory (kernel, initramfs, disk images); default a fresh temp dir")
	fs.DurationVar(&c.slack, "slack", 500*time.Millisecond, "the 2·fsync term of the time bounds, plus TCG timer slack")
	fs.DurationVar(&c.minDelay, "min-delay", 1500*time.Millisecond, "shortest time commits run before the crash")
	fs.DurationVar(&c.maxDelay, "max-delay", 4*time.Second, "longest time commits run before the crash")
	fs.DurationVar(&c.timeout, "boot-timeout", 2*time.Minute, "kill a guest that runs longer (the trial is then run again, up to twice: a hung emulated guest is the lab's failure, not the log's)")
	fs.StringVar(&c.accel, "accel", "tcg", "tcg, kvm, or auto (kvm if a probe guest boots under it, else tcg)")
	var methods string
	fs.StringVar(&methods, "sync-methods", "fdatasync", "comma-separated sync methods to run each policy under (fdatasync, fsync, O_DSYNC, O_DIRECT, O_DIRECT|O_DSYNC), or all")
	fs.StringVar(&c.negative, "negative", "", "run the log on a negative-control filesystem that must be caught: broken (Sync does nothing) or late (each write held until the next Sync, so every group is acknowledged one fsync early); meant for SyncEveryCommit with fdatasync")
	fs.IntVar(&c.powerLoss, "power-loss", 0, "also record each crash boot's block writes (QEMU blklogwrites) and judge up to this many power-loss disk states per trial built from them (0: off)")
	fs.IntVar(&c.powerLossBoots, "power-loss-boots", 0, "of each trial's power-loss states, boot the guest's verify mode on this many (the kernel replays the journal) and check it agrees with the host's judgement")
	fs.Uint64Var(&c.seed, "seed", 0, "seed of the power-loss states (0: a random one, printed)")
	plState := fs.String("power-loss-state", "", "rebuild and judge one power-loss state, as a violation names it (trial-dir:window:kind:seed), with the one policy of -policies, and exit")
	segSize := fs.Int64("segment-size", defaultSegSize, "the guest log's segment size in bytes (small sizes make the crash fall during rolls)")
	if err := fs.Parse(argv); err != nil {
		return 2
	}
	var err error
	if c.redis, err = parseRedisFlag(*redisList); err != nil {
		fmt.Fprintf(os.Stderr, "crashlab: %v\n", err)
		return 2
	}
	if pols == "all" {
		c.policies = labPolicies
	} else if pols != "none" {
		for _, n := range strings.Split(pols, ",") {
			p, ok := findPolicy(strings.TrimSpace(n))
			if !ok {
				fmt.Fprintf(os.Stderr, "crashlab: unknown policy %q\n", n)
				return 2
			}
			c.policies = append(c.policies, p)
		}
	}
	var ms []vfs.SyncMethod
	if methods == "all" {
		ms = vfs.SyncMethods()
	} else {
		for _, n := range strings.Split(methods, ",") {
			m, err := vfs.ParseSyncMethod(n)
			if err != nil {
				fmt.Fprintf(os.Stderr, "crashlab: %v\n", err)
				return 2
			}
			ms = append(ms, m)
		}
	}
	if _, err := negativeFS(vfs.OS(), c.negative); err != nil {
		fmt.Fprintf(os.Stderr, "crashlab: -negative: %v\n", err)
		return 2
	}
	if *segSize < 4<<10 || *segSize%(4<<10) != 0 {
		fmt.Fprintf(os.Stderr, "crashlab: -segment-size %d: want a multiple of 4096 bytes\n", *segSize)
		return 2
	}
	var runs []labPolicy
	for _, p := range c.policies {
		for _, m := range ms {
			runs = append(runs, variant(p, m, *segSize))
		}
	}
	c.policies = runs
	if missing := missingRedis(); len(c.redis) > 0 && len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "crashlab: -redis needs %s\n", strings.Join(missing, ", "))
		return 2
	}
	if *plState != "" {
		return replayState(c, *plState, out)
	}
	if c.powerLoss > 0 {
		for _, t := range []string{"e2fsck", "debugfs"} {
			if _, err := exec.LookPath(t); err != nil {
				fmt.Fprintf(os.Stderr, "crashlab: -power-loss needs %s (e2fsprogs)\n", t)
				return 2
			}
		}
		if c.seed == 0 {
			c.seed = rand.Uint64()
		}
	}
	if missing := missingTools(); len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "crashlab: missing tools: %s\ninstall them with:\n  apt-get update && apt-get install -y qemu-system-x86 busybox-static e2fsprogs cpio\n", strings.Join(missing, ", "))
		return 2
	}
	if c.work == "" {
		d, err := os.MkdirTemp("", "crashlab-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "crashlab:", err)
			return 2
		}
		c.work = d
	}
	lab, err := prepare(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashlab: preparing the guest:", err)
		return 2
	}
	build := "the library as released"
	if c.negative != "" {
		build = fmt.Sprintf("NEGATIVE CONTROL -negative %s: %s", c.negative, negativeControls[c.negative])
	}
	fmt.Fprintf(out, "crashlab: kernel %s, accel %s, work dir %s, build: %s\n", lab.kernelPkg, lab.accel, c.work, build)
	if c.powerLoss > 0 {
		fmt.Fprintf(out, "crashlab: power loss: up to %d states a trial, -seed %d\n", c.powerLoss, c.seed)
	}
	fmt.Fprintln(out)
	var reports []TrialReport
	bad, labFailed := false, false
	for _, p := range c.policies {
		for i := range c.trials {
			r := lab.trial(p, i)
			for again := 0; r.LabFailure != "" && again < 2; again++ {
				fmt.Fprintf(out, "%s trial %d: the lab failed (%s); running it again\n", p.Name, i, r.LabFailure)
				r = lab.trial(p, i)
			}
			if r.LabFailure != "" {
				labFailed = true
			}
			reports = append(reports, r)
			status := "ok"
			if len(r.Violations) > 0 {
				bad, status = true, "VIOLATION"
			}
			when := "amid commits"
			if r.Lull {
				when = "in a lull"
			}
			fmt.Fprintf(out, "%s trial %d: %s, crash %s after %d ms, acked %d, lost %d, recovered %d, %.0f s\n", p.Name, i, status, when, r.DelayMs, r.Acked, r.Lost, r.Recovered, r.BootSeconds)
			for _, v := range r.Violations {
				fmt.Fprintf(out, "    %s\n", v)
			}
			if o := r.PowerLoss; o != nil {
				status := "ok"
				if len(o.Violations) > 0 {
					bad, status = true, "VIOLATION"
				}
				fmt.Fprintf(out, "    %s %s\n", status, o.summary())
				for i, v := range o.Violations {
					if i == 5 {
						fmt.Fprintf(out, "      ... (%d more)\n", len(o.Violations)-5)
						break
					}
					fmt.Fprintf(out, "      %s\n", v)
				}
			}
		}
	}
	redisReports, redisBad, redisHung := lab.runRedis(out)
	reports = append(reports, redisReports...)
	bad, labFailed = bad || redisBad, labFailed || redisHung
	fmt.Fprintln(out)
	if len(c.policies) > 0 {
		fmt.Fprint(out, table(c, reports))
	}
	if len(c.redis) > 0 {
		fmt.Fprint(out, "\n"+redisTable(c, lab.redisVersion, reports))
	}
	if c.jsonOut != "" {
		b, _ := json.MarshalIndent(reports, "", "  ")
		if err := os.WriteFile(c.jsonOut, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "crashlab:", err)
		}
	}
	if bad {
		return 1
	}
	if labFailed {
		fmt.Fprintln(os.Stderr, "crashlab: a trial's guest hung three times: no verdict for it (exit 2)")
		return 2
	}
	return 0
}

func missingTools() []string {
	var missing []string
	for _, t := range []string{"qemu-system-x86_64", "mkfs.ext4", "cpio", "apt-get", "dpkg"} {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		missing = append(missing, "/bin/busybox (busybox-static)")
	} else if f, err := elf.Open("/bin/busybox"); err == nil {
		if f.Section(".interp") != nil {
			missing = append(missing, "a static /bin/busybox (busybox-static)")
		}
		f.Close()
	}
	return missing
}

func table(c config, rs []TrialReport) string {
	cols := []string{"policy", "trials", "acked (total)", "lost min / median / max", "oldest lost ack age", "promise (lost on power loss)", "violations"}
	if c.powerLoss > 0 {
		cols = append(cols, "power-loss states", "lost per state min / median / max", "oldest lost ack age (power loss)", "violations (power loss)")
	}
	t := measure.NewTable(cols...)
	for _, p := range c.policies {
		var lost []uint64
		var acked uint64
		var oldest time.Duration = -1
		n, viol := 0, 0
		for _, r := range rs {
			if r.Policy != p.Name {
				continue
			}
			n++
			acked += r.Acked
			lost = append(lost, r.Lost)
			oldest = max(oldest, r.OldestLostAge)
			viol += len(r.Violations)
		}
		slices.Sort(lost)
		age := "—"
		if oldest >= 0 {
			age = oldest.Round(time.Millisecond).String()
		}
		lm := "—"
		if len(lost) > 0 {
			lm = fmt.Sprintf("%d / %d / %d", lost[0], lost[len(lost)/2], lost[len(lost)-1])
		}
		row := []any{p.Name, n, measure.Thousands(int64(acked)), lm, age, p.Promise(c.slack).Text, viol}
		if c.powerLoss > 0 {
			var plLost []uint64
			plOldest, states, plViol := time.Duration(-1), 0, 0
			for _, r := range rs {
				if r.Policy == p.Name && r.PowerLoss != nil {
					plLost = append(plLost, r.PowerLoss.Lost...)
					plOldest = max(plOldest, r.PowerLoss.OldestLost)
					states += r.PowerLoss.States
					plViol += len(r.PowerLoss.Violations)
				}
			}
			slices.Sort(plLost)
			plm, plAge := "—", "—"
			if len(plLost) > 0 {
				plm = fmt.Sprintf("%d / %d / %d", plLost[0], plLost[len(plLost)/2], plLost[len(plLost)-1])
			}
			if plOldest >= 0 {
				plAge = plOldest.Round(time.Millisecond).String()
			}
			row = append(row, measure.Thousands(int64(states)), plm, plAge, plViol)
		}
		t.Row(row...)
	}
	var b strings.Builder
	t.Fprint(&b)
	return b.String()
}

type lab struct {
	c         config
	accel     string
	kernel    string
	initrd    string
	kernelPkg string
	// redisVersion is the redis-server copied into the guest (-redis).
	redisVersion string
}

func run(dir string, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return out, nil
}

// prepare fetches the kernel package (apt-get download), extracts vmlinuz and
// the modules the guest needs, and builds the initramfs around this binary.
func prepare(c config) (*lab, error) {
	l := &lab{c: c}
	kdir := filepath.Join(c.work, "kernel")
	if err := os.MkdirAll(kdir, 0o755); err != nil {
		return nil, err
	}
	debs, _ := filepath.Glob(filepath.Join(kdir, "linux-image-*.deb"))
	if len(debs) == 0 {
		out, err := run(kdir, "apt-cache", "depends", "linux-image-amd64")
		if err != nil {
			return nil, err
		}
		pkg := ""
		for _, ln := range strings.Split(string(out), "\n") {
			if f := strings.Fields(ln); len(f) == 2 && f[0] == "Depends:" && strings.HasPrefix(f[1], "linux-image-") {
				pkg = f[1]
			}
		}
		if pkg == "" {
			return nil, fmt.Errorf("no linux-image-*-amd64 package found by apt-cache depends linux-image-amd64 (run apt-get update)")
		}
		if _, err := run(kdir, "apt-get", "download", pkg); err != nil {
			return nil, err
		}
		debs, _ = filepath.Glob(filepath.Join(kdir, "linux-image-*.deb"))
		if len(debs) == 0 {
			return nil, errors.New("apt-get download left no .deb")
		}
	}
	l.kernelPkg = filepath.Base(debs[0])
	x := filepath.Join(kdir, "x")
	if _, err := os.Stat(x); err != nil {
		if _, err := run(kdir, "dpkg", "-x", debs[0], "x"); err != nil {
			return nil, err
		}
	}
	vm, _ := filepath.Glob(filepath.Join(x, "boot", "vmlinuz-*"))
	mods, _ := filepath.Glob(filepath.Join(x, "lib", "modules", "*"))
	if len(vm) == 0 || len(mods) == 0 {
		return nil, fmt.Errorf("no vmlinuz or modules in %s", debs[0])
	}
	l.kernel = vm[0]
	order, err := moduleOrder(mods[0], []string{"crc32c_generic", "virtio_pci", "virtio_blk", "ext4"})
	if err != nil {
		return nil, err
	}
	// The initramfs: busybox, /init, modules (decompressed), this binary.
	root := filepath.Join(c.work, "initramfs")
	os.RemoveAll(root)
	for _, d := range []string{"bin", "proc", "sys", "dev", "mnt", "lib/modules"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := copyFile("/bin/busybox", filepath.Join(root, "bin/busybox"), 0o755); err != nil {
		return nil, err
	}
	if err := os.Symlink("busybox", filepath.Join(root, "bin/sh")); err != nil {
		return nil, err
	}
	var names []string
	for _, m := range order {
		dst := filepath.Join(root, "lib/modules", filepath.Base(m))
		switch {
		case strings.HasSuffix(m, ".xz"):
			dst = strings.TrimSuffix(dst, ".xz")
			if _, err := run(root, "sh", "-c", fmt.Sprintf("xz -dc %q > %q", filepath.Join(mods[0], m), dst)); err != nil {
				return nil, err
			}
		case strings.HasSuffix(m, ".zst"):
			dst = strings.TrimSuffix(dst, ".zst")
			if _, err := run(root, "sh", "-c", fmt.Sprintf("zstd -dqc %q > %q", filepath.Join(mods[0], m), dst)); err != nil {
				return nil, err
			}
		default:
			if err := copyFile(filepath.Join(mods[0], m), dst, 0o644); err != nil {
				return nil, err
			}
		}
		names = append(names, filepath.Base(dst))
	}
	initScript := "#!/bin/sh\n/bin/busybox --install -s /bin\nmount -t proc proc /proc\nmount -t sysfs sys /sys\nmount -t devtmpfs dev /dev\n"
	for _, n := range names {
		initScript += "insmod /lib/modules/" + n + "\n"
	}
	initScript += "i=0; while [ ! -b /dev/vda ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done\n" +
		"mount -t ext4 /dev/vda /mnt || echo crashlab: mount failed\nexec /crashlab\n"
	if err := os.WriteFile(filepath.Join(root, "init"), []byte(initScript), 0o755); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if f, err := elf.Open(self); err != nil {
		return nil, err
	} else {
		dyn := f.Section(".interp") != nil
		f.Close()
		if dyn {
			return nil, errors.New("this binary is dynamically linked; build it with CGO_ENABLED=0 (it is also the guest's workload)")
		}
	}
	if err := copyFile(self, filepath.Join(root, "crashlab"), 0o755); err != nil {
		return nil, err
	}
	if len(c.redis) > 0 {
		if l.redisVersion, err = addRedis(root); err != nil {
			return nil, fmt.Errorf("copying redis-server into the guest: %w", err)
		}
	}
	l.initrd = filepath.Join(c.work, "initramfs.cpio")
	if _, err := run(root, "sh", "-c", "find . | cpio -o -H newc --quiet > "+l.initrd); err != nil {
		return nil, err
	}
	l.accel = c.accel
	if l.accel == "auto" {
		l.accel = "tcg"
		if _, err := os.Stat("/dev/kvm"); err == nil && kvmBoots(l) {
			l.accel = "kvm"
		}
	}
	return l, nil
}

// kvmBoots tries a short KVM boot of the verify mode on an empty disk: KVM is
// used only when a guest actually reaches the workload under it.
func kvmBoots(l *lab) bool {
	dir, err := os.MkdirTemp(l.c.work, "kvmprobe-")
	if err != nil {
		return false
	}
	defer os.RemoveAll(dir)
	img := filepath.Join(dir, "disk.img")
	if err := mkDisk(img, false); err != nil {
		return false
	}
	shmPath := filepath.Join("/dev/shm", "crashlab-"+filepath.Base(dir))
	defer os.Remove(shmPath)
	if err := os.WriteFile(shmPath, make([]byte, shmSize), 0o600); err != nil {
		return false
	}
	_, err = l.boot("kvm", img, "", shmPath, "cl.mode=verify", filepath.Join(dir, "console.log"), 60*time.Second)
	b, _ := os.ReadFile(shmPath)
	return err == nil && len(b) >= 64 && binary.LittleEndian.Uint64(b[hdrVerify:]) != 0
}

// mkDisk makes an ext4 disk image: 256 MiB, or for the power-loss mode a
// 64 MiB filesystem (small, so each state costs little; inode tables and
// journal written by mkfs, not lazily by the guest) followed by the ack
// markers' sectors.
func mkDisk(img string, powerLoss bool) error {
	f, err := os.Create(img)
	if err != nil {
		return err
	}
	size := int64(256 << 20)
	if powerLoss {
		size = plDiskBytes
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	f.Close()
	if powerLoss {
		_, err = run(filepath.Dir(img), "mkfs.ext4", "-F", "-q", "-b", "4096", "-E", "lazy_itable_init=0,lazy_journal_init=0", img, fmt.Sprintf("%dk", plFsBytes>>10))
		return err
	}
	_, err = run(filepath.Dir(img), "mkfs.ext4", "-F", "-q", img)
	return err
}

func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, mode)
}

// moduleOrder resolves each wanted module's "depends=" (from the .modinfo
// section of the .ko, as depmod would): every wanted module after its
// dependencies, paths relative to moddir; built-in or absent ones are skipped.
func moduleOrder(moddir string, want []string) ([]string, error) {
	byName := map[string]string{}
	err := filepath.WalkDir(filepath.Join(moddir, "kernel"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".ko") {
			return err
		}
		rel, _ := filepath.Rel(moddir, p)
		byName[strings.ReplaceAll(strings.TrimSuffix(d.Name(), ".ko"), "-", "_")] = rel
		return nil
	})
	if err != nil {
		return nil, err
	}
	depends := func(rel string) ([]string, error) {
		f, err := elf.Open(filepath.Join(moddir, rel))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		sec := f.Section(".modinfo")
		if sec == nil {
			return nil, nil
		}
		data, err := sec.Data()
		if err != nil {
			return nil, err
		}
		for _, kv := range bytes.Split(data, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok && len(v) > 0 {
				return strings.Split(string(v), ","), nil
			}
		}
		return nil, nil
	}
	var order []string
	seen := map[string]bool{}
	var visit func(string) error
	visit = func(name string) error {
		name = strings.ReplaceAll(name, "-", "_")
		rel, ok := byName[name]
		if !ok || seen[name] {
			return nil // built in, absent, or done
		}
		seen[name] = true
		ds, err := depends(rel)
		if err != nil {
			return err
		}
		for _, d := range ds {
			if err := visit(d); err != nil {
				return err
			}
		}
		order = append(order, rel)
		return nil
	}
	for _, w := range want {
		if err := visit(w); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// boot runs one guest to its end (power off or panic with -no-reboot). With
// wlog set, the disk sits behind QEMU's blklogwrites driver, which records
// every write and flush into the file wlog (it must exist).
func (l *lab) boot(accel, img, wlog, shmPath, args, console string, timeout time.Duration) (time.Duration, error) {
	acc := []string{"-accel", "tcg,thread=multi"}
	if accel == "kvm" {
		acc = []string{"-accel", "kvm", "-cpu", "host"}
	}
	qargs := append(acc,
		"-m", "512", "-smp", "2", "-no-reboot", "-nographic",
		"-kernel", l.kernel, "-initrd", l.initrd,
		"-append", "console=ttyS0 panic=-1 quiet "+args,
	)
	if wlog == "" {
		qargs = append(qargs, "-drive", "file="+img+",format=raw,if=virtio,cache=writeback")
	} else {
		// No write-zeroes or discard requests: QEMU 7.2's blklogwrites could
		// misplace a write-zeroes entry when requests overlap.
		qargs = append(qargs,
			"-blockdev", "driver=file,filename="+img+",node-name=img0,cache.direct=off",
			"-blockdev", "driver=file,filename="+wlog+",node-name=wlog0",
			"-blockdev", "driver=blklogwrites,file=img0,log=wlog0,log-sector-size=512,node-name=lw0",
			"-device", "virtio-blk-pci,drive=lw0,write-cache=on,discard=off,write-zeroes=off")
	}
	qargs = append(qargs,
		"-object", "memory-backend-file,id=m,share=on,mem-path="+shmPath+",size="+fmt.Sprint(shmSize>>20)+"M",
		"-device", "ivshmem-plain,memdev=m",
	)
	f, err := os.Create(console)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	cmd := exec.Command("qemu-system-x86_64", qargs...)
	cmd.Stdout, cmd.Stderr = f, f
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		err = fmt.Errorf("%w after %s (console: %s)", errGuestHung, timeout, console)
	}
	return time.Since(start), err
}

// errGuestHung is a boot that outran -boot-timeout. Under the emulator on a
// loaded host the guest's timers can stop firing (RCU stall warnings on its
// console): a failure of the lab, retried, never a verdict on the log.
var errGuestHung = errors.New("the guest was still running")

// hung records a boot error: a hung guest as the lab's failure, anything
// else as a violation.
func (r *TrialReport) hung(what string, err error, fail func(string, ...any) TrialReport) TrialReport {
	if errors.Is(err, errGuestHung) {
		r.LabFailure = fmt.Sprintf("%s: %v", what, err)
		return *r
	}
	return fail("%s: %v", what, err)
}

// trial: fresh disk, crash boot, verify boot, judge.
func (l *lab) trial(p labPolicy, i int) TrialReport {
	r := TrialReport{Policy: p.Name, Trial: i, Broken: l.c.negative, OldestLostAge: -1}
	dir := filepath.Join(l.c.work, fmt.Sprintf("trial-%s-%d", safeName(p.Name), i))
	os.RemoveAll(dir)
	fail := func(format string, a ...any) TrialReport {
		r.Violations = append(r.Violations, fmt.Sprintf(format, a...))
		return r
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail("%v", err)
	}
	img := filepath.Join(dir, "disk.img")
	pl := l.c.powerLoss > 0
	if err := mkDisk(img, pl); err != nil {
		return fail("mkfs: %v", err)
	}
	wlog, marker := "", ""
	if pl {
		if err := copyFile(img, filepath.Join(dir, "disk0.img"), 0o644); err != nil {
			return fail("%v", err)
		}
		wlog = filepath.Join(dir, "wlog.bin")
		if err := os.WriteFile(wlog, nil, 0o644); err != nil {
			return fail("%v", err)
		}
		marker = fmt.Sprintf(" cl.marker=%d", plFsBytes)
	}
	shmPath := fmt.Sprintf("/dev/shm/crashlab-%d-%s-%d", os.Getpid(), safeName(p.Name), i)
	defer os.Remove(shmPath)
	if err := os.WriteFile(shmPath, make([]byte, shmSize), 0o600); err != nil {
		return fail("%v", err)
	}
	span := max(l.c.maxDelay-l.c.minDelay, time.Millisecond)
	r.DelayMs = int((l.c.minDelay + rand.N(span)) / time.Millisecond)
	r.Lull = i%2 == 1 // odd trials crash with every committer idle, just after its last ack
	lull := 0
	if r.Lull {
		lull = 1
	}
	t1, err := l.boot(l.accel, img, wlog, shmPath, fmt.Sprintf("cl.mode=work cl.policy=%s cl.delayms=%d cl.lull=%d cl.method=%s cl.segsize=%d cl.negative=%s%s", guestName(p), r.DelayMs, lull, strings.ReplaceAll(p.Method.String(), "|", "+"), p.SegSize, l.c.negative, marker), filepath.Join(dir, "console-crash.log"), l.c.timeout)
	if err != nil {
		return r.hung("crash boot", err, fail)
	}
	work, err := os.ReadFile(shmPath)
	if err != nil {
		return fail("%v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "shm-crash.bin"), work, 0o644); err != nil {
		return fail("%v", err)
	}
	if binary.LittleEndian.Uint64(work[hdrMagic:]) != shmMagic {
		if why, ok := bootPanic(work, filepath.Join(dir, "console-crash.log")); ok {
			r.LabFailure = why
			return r
		}
		return fail("the workload never started (console: %s): %s", filepath.Join(dir, "console-crash.log"), msg(work))
	}
	// Verify boot on the same disk image, with a fresh shared memory.
	if err := os.WriteFile(shmPath, make([]byte, shmSize), 0o600); err != nil {
		return fail("%v", err)
	}
	t2, err := l.boot(l.accel, img, "", shmPath, "cl.mode=verify", filepath.Join(dir, "console-verify.log"), l.c.timeout)
	r.BootSeconds = (t1 + t2).Seconds()
	if err != nil {
		return r.hung("verify boot", err, fail)
	}
	ver, err := os.ReadFile(shmPath)
	if err != nil {
		return fail("%v", err)
	}
	os.WriteFile(filepath.Join(dir, "shm-verify.bin"), ver, 0o644)
	t := decode(p.Name, work, ver)
	if binary.LittleEndian.Uint64(ver[hdrVerify:]) == 0 {
		return fail("the verify boot reported nothing (console: %s): %s", filepath.Join(dir, "console-verify.log"), msg(ver))
	}
	if m := msg(work); m != "" {
		r.Violations = append(r.Violations, "workload: "+m)
	}
	v := Judge(t, p.Promise(l.c.slack))
	r.Acked, r.Lost, r.OldestLostAge, r.Recovered = v.Acked, v.Lost, v.OldestLostAge, len(t.Recs)
	r.Violations = append(r.Violations, v.Violations...)
	if pl {
		h := fnv.New64a()
		fmt.Fprintf(h, "%d/%s/%d", l.c.seed, p.Name, i)
		o := l.powerLoss(dir, p, work, h.Sum64(), nil)
		r.PowerLoss = &o
	}
	return r
}

// replayState rebuilds and judges one power-loss state (-power-loss-state)
// from a trial directory's block log and shared memory.
func replayState(c config, spec string, out *os.File) int {
	i := strings.LastIndex(spec, ":")
	i = strings.LastIndex(spec[:max(i, 0)], ":")
	i = strings.LastIndex(spec[:max(i, 0)], ":")
	if i <= 0 {
		fmt.Fprintf(os.Stderr, "crashlab: -power-loss-state %q: want trial-dir:window:kind:seed\n", spec)
		return 2
	}
	dir := spec[:i]
	s, err := parsePLState(spec[i+1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "crashlab: -power-loss-state: %v\n", err)
		return 2
	}
	if len(c.policies) != 1 {
		fmt.Fprintln(os.Stderr, "crashlab: -power-loss-state needs the trial's policy: -policies with exactly one (and -sync-methods one)")
		return 2
	}
	work, err := os.ReadFile(filepath.Join(dir, "shm-crash.bin"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashlab:", err)
		return 2
	}
	l := &lab{c: c}
	o := l.powerLoss(dir, c.policies[0], work, 0, []plState{s})
	fmt.Fprintf(out, "%s: %s\n", s, o.summary())
	for _, k := range o.Kept {
		fmt.Fprintf(out, "  the state's image, after e2fsck: %s\n", k)
	}
	for _, v := range o.Violations {
		fmt.Fprintf(out, "  %s\n", v)
	}
	if len(o.Violations) > 0 {
		return 1
	}
	return 0
}

func u64(b []byte, off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }

func msg(b []byte) string {
	n := min(int(u64(b, hdrMsgLen)), hdrMsgMax)
	return string(bytes.TrimRight(b[hdrMsg:hdrMsg+n], "\x00"))
}

// decode turns the two shared-memory images into a Trial.
func decode(policy string, work, ver []byte) Trial {
	t := Trial{Policy: policy, CrashNs: int64(u64(work, hdrCrashNs))}
	g := int(u64(work, hdrGorout))
	if g <= 0 || g > 64 {
		g = goroutines
	}
	rs, capacity := regionSize(g), uint64(ringCap(g))
	for gid := range g {
		base := ackBase + gid*rs
		n := u64(work, base)
		t.AckCounts = append(t.AckCounts, n)
		from := uint64(0)
		if n > capacity {
			from = n - capacity
		}
		for seq := from; seq < n; seq++ {
			e := base + entryBase + int(seq%capacity)*32
			t.Acks = append(t.Acks, Ack{Gid: u64(work, e+24), Seq: u64(work, e+8), LSN: u64(work, e), TimeNs: int64(u64(work, e+16))})
		}
	}
	switch u64(ver, hdrVerify) {
	case 2:
		t.OpenErr = cmp.Or(msg(ver), "failed")
		return t
	}
	if u64(ver, hdrReopen) != 1 {
		t.ReopenErr = cmp.Or(msg(ver), "no result")
	}
	n := min(int(u64(ver, hdrNRecs)), recMax)
	for i := range n {
		e := recBase + i*32
		t.Recs = append(t.Recs, Rec{LSN: u64(ver, e), Gid: u64(ver, e+8), Seq: u64(ver, e+16), OK: u64(ver, e+24) == 1})
	}
	return t
}
