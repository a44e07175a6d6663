package main

import (
	"bytes"
	"fmt"
	"os"
)

// bootPanic reports whether a work boot that never started its workload
// died because the emulated guest's kernel panicked before running it (on
// a loaded host QEMU's emulator can miss the guest's timer checks, and the
// kernel panics with "IO-APIC + timer doesn't work"): the shared memory is
// untouched and the console shows the panic. That is the lab's failure, run
// again, not a verdict; a workload that started and failed leaves its
// message in the shared memory and stays a violation.
func bootPanic(work []byte, console string) (string, bool) {
	if u64(work, hdrMagic) != 0 || msg(work) != "" {
		return "", false
	}
	b, err := os.ReadFile(console)
	if err != nil {
		return "", false
	}
	i := bytes.Index(b, []byte("Kernel panic - not syncing:"))
	if i < 0 {
		return "", false
	}
	line, _, _ := bytes.Cut(b[i:], []byte("\n"))
	return fmt.Sprintf("the guest kernel panicked while booting, before the workload (%s; console: %s)", bytes.TrimSpace(line), console), true
}
