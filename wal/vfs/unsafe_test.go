package vfs_test

import "unsafe"

func unsafeAddr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// alignedCopy returns a copy of p at an address that is a multiple of align.
func alignedCopy(p []byte, align int) []byte {
	buf := make([]byte, len(p)+align)
	off := 0
	for unsafeAddr(buf[off:])%uintptr(align) != 0 {
		off++
	}
	out := buf[off : off+len(p)]
	copy(out, p)
	return out
}
