package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ktracer counts one process's sync and write system calls through a
// tracefs instance of its own (instances/walbench-PID), so that it neither
// reads nor disturbs the global trace buffer other tools may be using.
// Not safe for concurrent use: one window at a time.
type ktracer struct {
	inst    string // the instance directory
	mounted string // where walbench mounted tracefs itself, or ""
	pid     int    // the process being traced, between start and stop
}

// traceBufferKB is the instance's ring buffer per CPU: 16 MiB shared out
// over the CPUs, at least 1 MiB each (about 20,000 syscall events), several
// times what one cell of the experiment makes on one CPU.
func traceBufferKB() int { return max(1024, 16384/runtime.NumCPU()) }

// openKtracer finds tracefs (mounting it under runDir if it is not mounted:
// this needs root) and creates walbench's instance with the syscall events
// enabled and tracing off. It returns nil and the reason when the kernel
// cannot be asked.
func openKtracer(runDir string) (*ktracer, string) {
	k := &ktracer{}
	root := ""
	for _, d := range []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"} {
		if _, err := os.Stat(filepath.Join(d, "instances")); err == nil {
			root = d
			break
		}
	}
	if root == "" {
		d := filepath.Join(runDir, "tracefs")
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, fmt.Sprintf("tracefs is not mounted and %v", err)
		}
		if err := unix.Mount("nodev", d, "tracefs", 0, ""); err != nil {
			return nil, fmt.Sprintf("tracefs is not mounted and mounting it failed (%v; it needs root: mount -t tracefs nodev /sys/kernel/tracing)", err)
		}
		root, k.mounted = d, d
	}
	k.inst = filepath.Join(root, "instances", fmt.Sprintf("walbench-%d", os.Getpid()))
	if err := os.Mkdir(k.inst, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		k.close()
		return nil, fmt.Sprintf("cannot create a tracefs instance: %v", err)
	}
	setup := []struct{ file, value string }{
		{"tracing_on", "0"},
		{"buffer_size_kb", strconv.Itoa(traceBufferKB())},
		{"options/event-fork", "1"},
	}
	for _, ev := range append(append([]string{}, syncEvents...), writeEvents...) {
		if _, err := os.Stat(filepath.Join(k.inst, "events/syscalls", ev)); err == nil {
			setup = append(setup, struct{ file, value string }{filepath.Join("events/syscalls", ev, "enable"), "1"})
		} else if slices.Contains(syncEvents, ev) {
			k.close()
			return nil, fmt.Sprintf("the kernel has no %s tracepoint (CONFIG_FTRACE_SYSCALLS)", ev)
		}
	}
	for _, s := range setup {
		if err := k.write(s.file, s.value); err != nil {
			k.close()
			return nil, err.Error()
		}
	}
	return k, ""
}

// write writes value to the instance's file (truncating it).
func (k *ktracer) write(file, value string) error {
	if err := os.WriteFile(filepath.Join(k.inst, file), []byte(value), 0); err != nil {
		return fmt.Errorf("tracefs %s: %w", file, err)
	}
	return nil
}

// threads lists the thread IDs of process pid.
func threads(pid int) ([]string, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(ents))
	for i, e := range ents {
		ids[i] = e.Name()
	}
	return ids, nil
}

// start clears the buffer and traces every thread of process pid, and any
// thread they start, until stop.
func (k *ktracer) start(pid int) error {
	if err := k.write("tracing_on", "0"); err != nil {
		return err
	}
	ids, err := threads(pid)
	if err != nil {
		return fmt.Errorf("tracing pid %d: %w", pid, err)
	}
	if err := k.write("set_event_pid", strings.Join(ids, " ")); err != nil {
		return err
	}
	if err := k.write("trace", ""); err != nil {
		return err
	}
	if err := k.write("tracing_on", "1"); err != nil {
		return err
	}
	// A thread started between the listing and event-fork taking effect
	// is added now.
	again, err := threads(pid)
	if err != nil {
		return fmt.Errorf("tracing pid %d: %w", pid, err)
	}
	var extra []string
	for _, id := range again {
		if !slices.Contains(ids, id) {
			extra = append(extra, id)
		}
	}
	if len(extra) > 0 {
		f, err := os.OpenFile(filepath.Join(k.inst, "set_event_pid"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return fmt.Errorf("tracefs set_event_pid: %w", err)
		}
		_, err = f.WriteString(strings.Join(extra, " "))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("tracefs set_event_pid: %w", err)
		}
	}
	k.pid = pid
	return nil
}

// stop ends the window and counts what the traced process did, naming its
// descriptors from /proc/PID/fd (so it must run before the process closes
// them); dir is the subject's data directory.
func (k *ktracer) stop(dir string) (kernelCount, error) {
	if err := k.write("tracing_on", "0"); err != nil {
		return kernelCount{}, err
	}
	b, err := os.ReadFile(filepath.Join(k.inst, "trace"))
	if err != nil {
		return kernelCount{}, fmt.Errorf("tracefs trace: %w", err)
	}
	c, err := parseTrace(string(b))
	if err != nil {
		return kernelCount{}, err
	}
	pid := k.pid
	kc := c.attribute(realPath(dir), func(fd int) string {
		t, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd))
		if err != nil {
			return ""
		}
		return t
	})
	kc.Lost = k.overruns()
	return kc, nil
}

// overruns sums the events each CPU's buffer dropped since the last clear.
func (k *ktracer) overruns() uint64 {
	cpus, _ := filepath.Glob(filepath.Join(k.inst, "per_cpu", "cpu*", "stats"))
	var n uint64
	for _, p := range cpus {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "overrun:"); ok {
				x, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				n += x
			}
		}
	}
	return n
}

// close removes the instance and unmounts tracefs if walbench mounted it.
func (k *ktracer) close() {
	if k == nil {
		return
	}
	if k.inst != "" {
		_ = k.write("tracing_on", "0")
		_ = os.Remove(k.inst)
	}
	if k.mounted != "" {
		_ = unix.Unmount(k.mounted, unix.MNT_DETACH)
		_ = os.Remove(k.mounted)
	}
}
