package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// The log-writes format, as Linux's dm-log-writes target and QEMU's
// blklogwrites block driver write it: sector 0 holds the super block (magic,
// version, entry count, sector size, little-endian); the entries follow from
// sector 1, each a one-sector header (sector, sector count, flags, length of
// private data) followed by the data it wrote, rounded up to whole sectors. A
// FLUSH entry carries no data; a DISCARD entry carries none either although
// it covers sectors. QEMU logs an operation after it completed on the disk
// image, so a write the guest saw complete before it issued a flush lies
// before that flush in the log.
const (
	lwFlush   = 1 << 0
	lwFUA     = 1 << 1
	lwDiscard = 1 << 2
	lwMark    = 1 << 3

	lwMagic   = 0x6a736677736872
	lwVersion = 1
)

// lwEntry is one logged operation.
type lwEntry struct {
	Sector, NrSectors uint64 // in units of the log's sector size
	Flags             uint64
	Data              []byte // what was written (nil for a flush or discard)
	Mark              string // a MARK entry's name (dm-log-writes only)
}

func (e lwEntry) isFlush() bool { return e.Flags&lwFlush != 0 }

// errLogWrites is a log that does not parse as the log-writes format.
var errLogWrites = errors.New("not a valid log-writes log")

// readLogWrites parses the log at path. The super block's entry count is
// only a lower bound (QEMU rewrites it at each flush and every few thousand
// entries, and the guest's crash may come between), so entries are read
// until the file ends or a header is not one; a final entry cut short is
// dropped.
func readLogWrites(path string) (sectorSize int, entries []lwEntry, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, nil, err
	}
	if len(b) < 32 {
		return 0, nil, fmt.Errorf("%s: %w: %d bytes", path, errLogWrites, len(b))
	}
	le := binary.LittleEndian
	if le.Uint64(b) != lwMagic || le.Uint64(b[8:]) != lwVersion {
		return 0, nil, fmt.Errorf("%s: %w: magic %#x version %d", path, errLogWrites, le.Uint64(b), le.Uint64(b[8:]))
	}
	minEntries := le.Uint64(b[16:])
	ss := int(le.Uint32(b[24:]))
	if ss < 512 || ss&(ss-1) != 0 {
		return 0, nil, fmt.Errorf("%s: %w: sector size %d", path, errLogWrites, ss)
	}
	off := ss
	for off+ss <= len(b) {
		h := b[off : off+ss]
		e := lwEntry{Sector: le.Uint64(h), NrSectors: le.Uint64(h[8:]), Flags: le.Uint64(h[16:])}
		dataLen := le.Uint64(h[24:])
		if e.Flags&^(lwFlush|lwFUA|lwDiscard|lwMark) != 0 || e.NrSectors > uint64(len(b)/ss) || dataLen > uint64(ss-32) {
			break // past the last entry
		}
		if e.Flags&lwMark != 0 {
			e.Mark = string(h[32 : 32+dataLen])
		}
		if e.Flags == 0 && e.NrSectors == 0 {
			break // a zeroed sector: the log ends
		}
		off += ss
		if e.Flags&(lwDiscard|lwMark) == 0 && e.NrSectors > 0 {
			n := int(e.NrSectors) * ss
			if off+n > len(b) {
				break // cut short
			}
			e.Data = b[off : off+n]
			off += n
		}
		entries = append(entries, e)
	}
	if uint64(len(entries)) < minEntries {
		return 0, nil, fmt.Errorf("%s: %w: %d entries read, the super block counts %d", path, errLogWrites, len(entries), minEntries)
	}
	return ss, entries, nil
}

// writeLogWrites writes entries in the log-writes format (for tests).
func writeLogWrites(w io.Writer, ss int, entries []lwEntry) error {
	le := binary.LittleEndian
	sb := make([]byte, ss)
	le.PutUint64(sb, lwMagic)
	le.PutUint64(sb[8:], lwVersion)
	le.PutUint64(sb[16:], uint64(len(entries)))
	le.PutUint32(sb[24:], uint32(ss))
	if _, err := w.Write(sb); err != nil {
		return err
	}
	for _, e := range entries {
		h := make([]byte, ss)
		le.PutUint64(h, e.Sector)
		le.PutUint64(h[8:], e.NrSectors)
		le.PutUint64(h[16:], e.Flags)
		le.PutUint64(h[24:], uint64(len(e.Mark)))
		copy(h[32:], e.Mark)
		if _, err := w.Write(append(h, e.Data...)); err != nil {
			return err
		}
	}
	return nil
}
