package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// fsMagic maps statfs(2) f_type magic numbers to filesystem names.
var fsMagic = map[int64]string{
	0xEF53: "ext4", 0x58465342: "xfs", 0x9123683E: "btrfs", 0x2FC12FC1: "zfs",
	0xF2F52010: "f2fs", 0xCA451A4E: "bcachefs", 0x3153464A: "jfs", 0x52654973: "reiserfs",
	0x01021994: "tmpfs", 0x858458F6: "ramfs", 0x794C7630: "overlayfs", 0x65735546: "fuse",
	0x6969: "nfs", 0xFF534D42: "cifs", 0xFE534D42: "smb2", 0x01021997: "9p",
	0x6A656A63: "virtiofs", 0x4D44: "vfat", 0x2011BAB0: "exfat", 0x5346544E: "ntfs",
	0x73717368: "squashfs", 0x00C36400: "ceph", 0x47504653: "gpfs", 0x0BD00BD0: "lustre",
}

// volatileFS are the filesystems on which fsync is (nearly) free.
var volatileFS = map[string]bool{"tmpfs": true, "ramfs": true, "overlayfs": true}

// filesystem returns the name of the filesystem holding dir, and whether
// fsync is nearly free on it.
func filesystem(dir string) (string, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "unknown (" + err.Error() + ")", false
	}
	name, ok := fsMagic[int64(st.Type)]
	if !ok {
		return fmt.Sprintf("unknown (statfs magic %#x)", uint64(st.Type)), false
	}
	return name, volatileFS[name]
}

// blockDevice describes the block device under dir's mount: its kernel
// name, model and rotational flag from /sys, or "unknown" with the reason.
func blockDevice(dir string) string {
	dir = realPath(dir)
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "unknown (no /proc/self/mountinfo)"
	}
	defer f.Close()
	var best, devno, source string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, postFields := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(postFields) < 2 {
			continue
		}
		mnt := unescapeMount(fields[4])
		if !within(dir, mnt) || len(mnt) < len(best) {
			continue
		}
		best, devno, source = mnt, fields[2], postFields[1]
	}
	if best == "" {
		return "unknown (mount not found)"
	}
	sys := "/sys/dev/block/" + devno
	target, err := filepath.EvalSymlinks(sys)
	if err != nil {
		return fmt.Sprintf("unknown (%s on %s, no block device)", source, best)
	}
	disk := target
	if _, err := os.Stat(target + "/partition"); err == nil {
		disk = filepath.Dir(target) // a partition: the disk is its parent
	}
	name := filepath.Base(disk)
	model := readTrim(disk + "/device/model")
	if model == "" {
		model = readTrim(disk + "/dm/name")
		if model != "" {
			model = "device-mapper " + model
		}
	}
	if model == "" {
		model = "model unknown"
	}
	rot := "rotation unknown"
	switch readTrim(disk + "/queue/rotational") {
	case "0":
		rot = "reported non-rotational"
	case "1":
		rot = "reported rotational (virtual disks often report so)"
	}
	return fmt.Sprintf("%s, %s, %s; mounted at %s from %s", name, model, rot, best, source)
}

// within reports whether path is mnt or lies under it.
func within(path, mnt string) bool {
	return mnt == "/" || path == mnt || strings.HasPrefix(path, mnt+"/")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
