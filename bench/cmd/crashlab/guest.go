package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
)

// shm is the guest's mapping of the ivshmem BAR; every store is atomic so the
// host sees it in the backing file the moment it is made (no buffering).
type shm []byte

func (m shm) word(off int) *uint64    { return (*uint64)(unsafe.Pointer(&m[off])) }
func (m shm) store(off int, v uint64) { atomic.StoreUint64(m.word(off), v) }
func (m shm) load(off int) uint64     { return atomic.LoadUint64(m.word(off)) }

func (m shm) message(format string, a ...any) {
	s := fmt.Sprintf(format, a...)
	if len(s) > hdrMsgMax {
		s = s[:hdrMsgMax]
	}
	copy(m[hdrMsg:], s)
	m.store(hdrMsgLen, uint64(len(s)))
}

// mapIvshmem finds the ivshmem-plain device (1af4:1110) and maps its BAR 2.
func mapIvshmem() (shm, error) {
	devs, _ := filepath.Glob("/sys/bus/pci/devices/*")
	for _, d := range devs {
		v, _ := os.ReadFile(d + "/vendor")
		id, _ := os.ReadFile(d + "/device")
		if strings.TrimSpace(string(v)) != "0x1af4" || strings.TrimSpace(string(id)) != "0x1110" {
			continue
		}
		_ = os.WriteFile(d+"/enable", []byte("1"), 0) // memory decoding on
		f, err := os.OpenFile(d+"/resource2", os.O_RDWR|os.O_SYNC, 0)
		if err != nil {
			return nil, err
		}
		b, err := syscall.Mmap(int(f.Fd()), 0, shmSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("mmap %s/resource2: %w", d, err)
		}
		return shm(b), nil
	}
	return nil, errors.New("no ivshmem device (1af4:1110) on the PCI bus")
}

func cmdline() map[string]string {
	b, _ := os.ReadFile("/proc/cmdline")
	m := map[string]string{}
	for _, f := range strings.Fields(string(b)) {
		if k, v, ok := strings.Cut(f, "="); ok && strings.HasPrefix(k, "cl.") {
			m[k[3:]] = v
		}
	}
	return m
}

func guestMain() {
	args := cmdline()
	m, err := mapIvshmem()
	if err != nil {
		fmt.Println("crashlab guest:", err)
		powerOff()
	}
	var runErr error
	switch args["mode"] {
	case "work":
		runErr = guestWork(m, args)
	case "verify":
		runErr = guestVerify(m)
	case "redis-work":
		runErr = redisWork(m, args)
	case "redis-verify":
		runErr = redisVerify(m, args)
	default:
		runErr = fmt.Errorf("unknown cl.mode %q", args["mode"])
	}
	if runErr != nil {
		fmt.Println("crashlab guest:", runErr)
		if m.load(hdrMsgLen) == 0 {
			m.message("%v", runErr)
		}
	}
	powerOff()
}

func powerOff() {
	syscall.Sync()
	_ = syscall.Reboot(syscall.LINUX_REBOOT_CMD_POWER_OFF)
	os.Exit(1)
}

const walDir = "/mnt/wal"

func guestWork(m shm, args map[string]string) error {
	p, ok := findPolicy(args["policy"])
	if !ok {
		return fmt.Errorf("unknown policy %q", args["policy"])
	}
	delay, _ := strconv.Atoi(args["delayms"])
	method := vfs.Fdatasync
	if s := args["method"]; s != "" {
		m, err := vfs.ParseSyncMethod(s)
		if err != nil {
			return err
		}
		method = m
	}
	seg := int64(defaultSegSize)
	if s := args["segsize"]; s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("cl.segsize: %w", err)
		}
		seg = n
	}
	fs, err := negativeFS(vfs.OS(), args["negative"])
	if err != nil {
		return err
	}
	l, err := wal.Open(walDir, wal.Options{FS: fs, Policy: p.Build(), SegmentSize: seg, SyncMethod: method})
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	m.store(hdrGorout, goroutines)
	m.store(hdrStartNs, uint64(time.Now().UnixNano()))
	m.store(hdrMagic, shmMagic)
	m.store(hdrPhase, phaseWorking)
	rs, capacity := regionSize(goroutines), uint64(ringCap(goroutines))
	// A lull trial stops the committers before the crash: each finishes the
	// commit it is in (its ack published) and waits. Nothing is in flight
	// when the kernel dies, so a commit acknowledged before its sync (a
	// group acked one fsync early) is lost for certain, where a crash amid
	// back-to-back commits would mostly find the next group's sync covering it.
	var pause atomic.Bool
	var idle sync.WaitGroup
	idle.Add(goroutines)
	for g := range goroutines {
		go func() {
			defer idle.Done()
			base := ackBase + g*rs
			b := make([]byte, payloadLen)
			for seq := uint64(0); ; seq++ {
				if pause.Load() {
					return
				}
				payload(b, uint64(g), seq, time.Now().UnixNano())
				lsn, err := l.Append(b)
				if err != nil {
					m.message("append gid %d seq %d: %v", g, seq, err)
					return
				}
				e := base + entryBase + int(seq%capacity)*32
				m.store(e, uint64(lsn))
				m.store(e+8, seq)
				m.store(e+16, uint64(time.Now().UnixNano()))
				m.store(e+24, uint64(g))
				m.store(base, seq+1) // published: seq acknowledged
				if seq+1 >= min(capacity, recMax/goroutines)*9/10 {
					return // the ring and the verify area stay large enough
				}
			}
		}()
	}
	if off := args["marker"]; off != "" {
		n, err := strconv.ParseInt(off, 10, 64)
		if err != nil {
			return fmt.Errorf("cl.marker: %w", err)
		}
		if err := startMarkers(m, n); err != nil {
			return err
		}
	}
	time.Sleep(time.Duration(delay) * time.Millisecond)
	if args["lull"] == "1" {
		pause.Store(true)
		done := make(chan struct{})
		go func() { idle.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second): // a commit stuck: crash anyway, the judge sees it
		}
		time.Sleep(time.Millisecond)
	}
	m.store(hdrCrashNs, uint64(time.Now().UnixNano()))
	m.store(hdrPhase, phaseCrashed)
	if err := os.WriteFile("/proc/sys/kernel/sysrq", []byte("1"), 0); err != nil {
		return err
	}
	f, err := os.OpenFile("/proc/sysrq-trigger", os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte("c"))
	return fmt.Errorf("the kernel survived sysrq-c: %v", err)
}

// startMarkers publishes the acknowledgements in the block stream for the
// power-loss mode (-power-loss): a goroutine writes, whenever the published
// ack counts have changed (checked every millisecond), a 512-byte marker
// (magic, marker number, guest time, goroutines, each goroutine's ack count)
// with O_DIRECT to /dev/vda at off (beyond the filesystem), cycling through
// markerSlots sectors. Each count was published before its marker was
// written, so every ack a marker counts lies after its commit's flush in the
// recorded stream.
func startMarkers(m shm, off int64) error {
	f, err := os.OpenFile("/dev/vda", os.O_WRONLY|syscall.O_DIRECT, 0)
	if err != nil {
		return fmt.Errorf("markers: %w", err)
	}
	buf, err := syscall.Mmap(-1, 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return fmt.Errorf("markers: %w", err)
	}
	rs := regionSize(goroutines)
	go func() {
		last := make([]uint64, goroutines)
		for k := uint64(1); ; {
			changed := false
			for g := range goroutines {
				if c := m.load(ackBase + g*rs); c != last[g] {
					last[g], changed = c, true
				}
			}
			if changed {
				b := buf[:markerLen]
				binary.LittleEndian.PutUint64(b, markerMagic)
				binary.LittleEndian.PutUint64(b[8:], k)
				binary.LittleEndian.PutUint64(b[16:], uint64(time.Now().UnixNano()))
				binary.LittleEndian.PutUint64(b[24:], goroutines)
				for g, c := range last {
					binary.LittleEndian.PutUint64(b[32+8*g:], c)
				}
				if _, err := f.WriteAt(b, off+int64(k%markerSlots)*markerLen); err != nil {
					m.message("marker %d: %v", k, err)
					return
				}
				k++
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return nil
}

func guestVerify(m shm) error {
	m.store(hdrPhase, phaseVerify)
	v := verifyLog(walDir, recMax)
	switch {
	case v.OpenErr != "":
		m.store(hdrVerify, 2)
		m.message("%s", v.OpenErr)
		return nil
	}
	m.store(hdrVerify, 1)
	for i, r := range v.Recs {
		e := recBase + i*32
		m.store(e, r.LSN)
		m.store(e+8, r.Gid)
		m.store(e+16, r.Seq)
		okw := uint64(0)
		if r.OK {
			okw = 1
		}
		m.store(e+24, okw)
	}
	m.store(hdrNRecs, uint64(v.N))
	if v.ReopenErr != "" {
		m.store(hdrReopen, 2)
		m.message("%s", v.ReopenErr)
		return nil
	}
	m.store(hdrReopen, 1)
	return nil
}

// verified is what verifyLog found.
type verified struct {
	OpenErr   string // recovery Open failed
	ReopenErr string // reading, or append/Sync/Close/reopen after recovery, failed
	Recs      []Rec  // the first max records read
	N         int    // records read
}

// verifyLog recovers the log in dir, reads it, then appends a record,
// syncs, closes, reopens, and checks the reopened log has one record more
// and was closed cleanly: the checks of the verify boot, run in the guest
// after an OS crash and on the host over a power-loss state's files.
func verifyLog(dir string, max int) verified {
	var v verified
	l, err := wal.Open(dir, wal.Options{SegmentSize: 4 << 20})
	if err != nil {
		v.OpenErr = fmt.Sprintf("recovery Open: %v", err)
		return v
	}
	n, err := readAll(l, func(i int, lsn wal.LSN, rec []byte) {
		if i >= max {
			return
		}
		gid, seq, ok := checkPayload(rec)
		v.Recs = append(v.Recs, Rec{LSN: uint64(lsn), Gid: gid, Seq: seq, OK: ok})
	})
	v.N = n
	if err != nil {
		v.ReopenErr = fmt.Sprintf("reading the recovered log: %v (info %+v)", err, l.Recovered())
		l.Close()
		return v
	}
	if err := reopen(l, dir, n); err != nil {
		v.ReopenErr = fmt.Sprintf("after recovery: %v", err)
	}
	return v
}

// reopen appends one record to the recovered log l (n records), syncs,
// closes, and reopens it.
func reopen(l *wal.Log, dir string, n int) error {
	b := make([]byte, payloadLen)
	payload(b, 1<<20, 0, time.Now().UnixNano())
	if _, err := l.Append(b); err != nil {
		l.Close()
		return fmt.Errorf("append: %w", err)
	}
	if err := l.Sync(); err != nil {
		l.Close()
		return fmt.Errorf("sync: %w", err)
	}
	if err := l.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	l, err := wal.Open(dir, wal.Options{SegmentSize: 4 << 20})
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	defer l.Close()
	n2, err := readAll(l, func(int, wal.LSN, []byte) {})
	if err != nil {
		return fmt.Errorf("reading after reopen: %w", err)
	}
	if n2 != n+1 {
		return fmt.Errorf("reopen read %d records, want %d", n2, n+1)
	}
	if !l.Recovered().Clean {
		return errors.New("reopen after Close: Recovered().Clean is false")
	}
	if err := l.Close(); err != nil {
		return fmt.Errorf("close after reopen: %w", err)
	}
	return nil
}

func readAll(l *wal.Log, f func(int, wal.LSN, []byte)) (int, error) {
	r, err := l.NewReader(0)
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		lsn, rec, err := r.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		f(n, lsn, rec)
		n++
	}
}
