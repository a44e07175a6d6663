package lesson_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Every lesson takes the same flags (examples/README.md): -dir and -quick.
// The lessons are built once and asked for their flags with -h.
func TestEveryLessonTakesTheSameFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every lesson")
	}
	root := filepath.Join("..", "..")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var lessons []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(root, e.Name(), "main.go")); err == nil {
			lessons = append(lessons, e.Name())
		}
	}
	if len(lessons) < 6 {
		t.Fatalf("found only %d lessons: %v", len(lessons), lessons)
	}
	bin := t.TempDir()
	args := []string{"build", "-o", bin + string(filepath.Separator)}
	for _, l := range lessons {
		args = append(args, "./"+l)
	}
	build := exec.Command("go", args...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, l := range lessons {
		out, _ := exec.Command(filepath.Join(bin, l), "-h").CombinedOutput() // -h exits 0 or 2 by Go release
		for _, f := range []string{"-dir", "-quick"} {
			if !strings.Contains(string(out), "  "+f) {
				t.Errorf("%s -h does not list %s:\n%s", l, f, out)
			}
		}
	}
}
