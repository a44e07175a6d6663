package vfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// fdatasyncFile flushes f's data, and the metadata needed to read it back,
// to stable storage.
func fdatasyncFile(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// fsyncFile flushes f's data and all its metadata (directories, and the
// Fsync method).
func fsyncFile(f *os.File) error { return unix.Fsync(int(f.Fd())) }

func lockFile(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) }

// noFollow makes Lock refuse a symbolic link instead of following it.
const noFollow = unix.O_NOFOLLOW

// methodFlags returns the open flags of m.
func methodFlags(m SyncMethod) (int, error) {
	switch m {
	case ODsync:
		return unix.O_DSYNC, nil
	case ODirect:
		return unix.O_DIRECT, nil
	case ODirectODsync:
		return unix.O_DIRECT | unix.O_DSYNC, nil
	}
	return 0, nil
}

// defaultDIOAlign is the direct-I/O alignment assumed when neither statx nor
// sysfs tells: every device's logical block size divides it in practice.
const defaultDIOAlign = 4096

// dioAlignment returns the alignment direct I/O on f needs, and where it
// came from: statx STATX_DIOALIGN (Linux 6.1+; the larger of the memory and
// offset alignments), else the logical block size of the block device
// holding f (sysfs, from st_dev), else defaultDIOAlign.
func dioAlignment(f *os.File) (int, string) {
	var stx unix.Statx_t
	err := unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN, &stx)
	if err == nil && stx.Mask&unix.STATX_DIOALIGN != 0 && stx.Dio_offset_align > 0 {
		if a := int(max(stx.Dio_mem_align, stx.Dio_offset_align)); isPow2(a) {
			return a, "statx STATX_DIOALIGN"
		}
	}
	if err == nil {
		dev := fmt.Sprintf("%d:%d", stx.Dev_major, stx.Dev_minor)
		paths := []string{"/sys/dev/block/" + dev + "/queue/logical_block_size"}
		// A partition's directory has no queue/; its disk's, the parent, has.
		if target, lerr := filepath.EvalSymlinks("/sys/dev/block/" + dev); lerr == nil {
			paths = append(paths, filepath.Join(filepath.Dir(target), "queue", "logical_block_size"))
		}
		for _, p := range paths {
			b, rerr := os.ReadFile(p)
			if rerr != nil {
				continue
			}
			if a, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && isPow2(a) {
				return a, "sysfs logical_block_size of " + dev
			}
		}
	}
	return defaultDIOAlign, "default 4096"
}

func isPow2(n int) bool { return n > 0 && n&(n-1) == 0 }

// fsTypeName names the filesystem holding path (or its directory), for error
// messages.
func fsTypeName(path string) string {
	var st unix.Statfs_t
	if unix.Statfs(filepath.Dir(path), &st) != nil {
		return "unknown"
	}
	switch uint32(st.Type) {
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlayfs"
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.FUSE_SUPER_MAGIC:
		return "fuse"
	case unix.NFS_SUPER_MAGIC:
		return "nfs"
	}
	return fmt.Sprintf("type 0x%x", uint32(st.Type))
}

// writebackFile starts writeback of f's bytes [off, off+n), and with wait
// waits for it: sync_file_range(2).
func writebackFile(f *os.File, off, n int64, wait bool) error {
	flags := unix.SYNC_FILE_RANGE_WRITE
	if wait {
		flags |= unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WAIT_AFTER
	}
	return unix.SyncFileRange(int(f.Fd()), off, n, flags)
}

// allocateFile reserves blocks for f's bytes [0, size): fallocate(2) with
// mode 0 (the size grows to cover them). A filesystem that cannot
// (EOPNOTSUPP; ENOSYS from an old kernel) yields an error matching
// errors.ErrUnsupported as well as the errno.
func allocateFile(f *os.File, size int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("%w: %w", err, errors.ErrUnsupported)
	}
	return err
}
