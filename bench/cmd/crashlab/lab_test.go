package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLab runs the real lab (QEMU, a kernel crash, a verify boot) for one
// trial of SyncEveryCommit, and the negative control, which must fail. Only
// with CRASHLAB=1: it needs the tools main prints and ~1–2 minutes under TCG.
func TestLab(t *testing.T) {
	if os.Getenv("CRASHLAB") != "1" {
		t.Skip("set CRASHLAB=1 to crash real kernels under QEMU")
	}
	work := t.TempDir()
	build := func(name string, tags ...string) string {
		bin := filepath.Join(work, name)
		args := append([]string{"build", "-o", bin}, tags...)
		cmd := exec.Command("go", append(args, ".")...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		return bin
	}
	good, broken := build("crashlab"), build("crashlab-broken", "-tags", "crashlab_broken")
	lab := func(bin string) (string, int) {
		cmd := exec.Command(bin, "-work", filepath.Join(work, "w"), "-trials", "1", "-policies", "SyncEveryCommit")
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	out, rc := lab(good)
	t.Logf("%s", out)
	if rc != 0 {
		t.Fatalf("the lab failed (exit %d)", rc)
	}
	out, rc = lab(broken)
	t.Logf("%s", out)
	// Lost acks, or (when a skipped roll sync left a zeroed segment) a failed recovery.
	if rc != 1 || !strings.Contains(out, "VIOLATION") {
		t.Fatalf("the negative control (crashlab_broken) was not flagged: exit %d", rc)
	}
}
