// Modproxy writes a Go module proxy as a directory of files (the GOPROXY
// protocol, served with GOPROXY=file://DIR) that holds durawal's modules at
// one release version, made from the working tree: the files git tracks, and
// those it would track (untracked but not ignored). CI uses it to build a
// program in a fresh module against the modules exactly as a release would
// publish them, without the network (.ci/proxycheck.sh):
//
//	go run ./bench/cmd/modproxy -out /tmp/proxy -version v0.2.0 . raftstore promwal
//
// Each argument is a module directory relative to the repository root. The
// module's zip is made with golang.org/x/mod/zip, as the go command and the
// public proxies make it, so its limits (file names, sizes) are checked the
// same way; files under a nested module's directory belong to that module
// and are left out, as they would be from a tag. Exit status 1 on any error.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

func main() {
	out := flag.String("out", "", "directory to write the proxy into (created)")
	version := flag.String("version", "", "the release version every module gets, e.g. v0.2.0")
	repo := flag.String("repo", ".", "the repository's root (a git work tree)")
	flag.Parse()
	if err := run(*repo, *out, *version, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

func run(repo, out, version string, dirs []string) error {
	if out == "" || len(dirs) == 0 {
		return fmt.Errorf("usage: modproxy -out DIR -version vX.Y.Z MODULEDIR...")
	}
	if !semver.IsValid(version) || semver.Canonical(version) != version || semver.Prerelease(version) != "" {
		return fmt.Errorf("version %q is not a release version such as v0.2.0", version)
	}
	files, err := gitFiles(repo)
	if err != nil {
		return err
	}
	modDirs := map[string]bool{} // every module directory of the tree, "." for the root
	for _, f := range files {
		if path.Base(f) == "go.mod" {
			modDirs[path.Dir(f)] = true
		}
	}
	for _, dir := range dirs {
		dir = path.Clean(filepath.ToSlash(dir))
		if !modDirs[dir] {
			return fmt.Errorf("%s: no go.mod there", dir)
		}
		if err := writeModule(repo, out, version, dir, files, modDirs); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
	}
	return nil
}

// gitFiles lists the files of the working tree that git tracks or would
// track, slash-separated and relative to repo.
func gitFiles(repo string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = repo
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	var files []string
	for f := range strings.SplitSeq(strings.TrimSuffix(string(b), "\x00"), "\x00") {
		if fi, err := os.Lstat(filepath.Join(repo, f)); err == nil && fi.Mode().IsRegular() {
			files = append(files, f) // skips files deleted from the tree but still in the index
		}
	}
	return files, nil
}

// owner returns the module directory f belongs to: the deepest one above it.
func owner(f string, modDirs map[string]bool) string {
	for d := path.Dir(f); ; d = path.Dir(d) {
		if modDirs[d] {
			return d
		}
		if d == "." || d == "/" {
			return "."
		}
	}
}

func writeModule(repo, out, version, dir string, files []string, modDirs map[string]bool) error {
	gomod, err := os.ReadFile(filepath.Join(repo, dir, "go.mod"))
	if err != nil {
		return err
	}
	modPath := modfile.ModulePath(gomod)
	if modPath == "" {
		return fmt.Errorf("go.mod names no module")
	}
	var zfiles []zip.File
	for _, f := range files {
		if owner(f, modDirs) != dir {
			continue
		}
		rel := f
		if dir != "." {
			rel = strings.TrimPrefix(f, dir+"/")
		}
		zfiles = append(zfiles, file{name: rel, full: filepath.Join(repo, f)})
	}
	escPath, err := module.EscapePath(modPath)
	if err != nil {
		return err
	}
	vdir := filepath.Join(out, filepath.FromSlash(escPath), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := zip.Create(&buf, module.Version{Path: modPath, Version: version}, zfiles); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		version + ".zip":  buf.Bytes(),
		version + ".mod":  gomod,
		version + ".info": info,
		"list":            []byte(version + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("%s@%s: %d files\n", modPath, version, len(zfiles))
	return nil
}

// file is one file of a module zip, read from the working tree.
type file struct{ name, full string }

func (f file) Path() string                 { return f.name }
func (f file) Lstat() (os.FileInfo, error)  { return os.Lstat(f.full) }
func (f file) Open() (io.ReadCloser, error) { return os.Open(f.full) }
