package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
)

// methodRow is one extra row of levels and tail: an InnoDB level run with a
// sync method other than the default (innodb_flush_method).
type methodRow struct {
	level  int
	method vfs.SyncMethod
}

// articleMethodRows are article 000's O_DIRECT rows, run by default.
var articleMethodRows = []methodRow{{2, vfs.ODirect}, {0, vfs.ODirect}}

// parseMethods turns -method into rows: every level × every listed method
// but fdatasync (the base rows). Empty means articleMethodRows.
func parseMethods(list string) ([]methodRow, error) {
	if strings.TrimSpace(list) == "" {
		return articleMethodRows, nil
	}
	var methods []vfs.SyncMethod
	for _, name := range strings.Split(list, ",") {
		if strings.TrimSpace(name) == "" {
			continue
		}
		m, err := vfs.ParseSyncMethod(name)
		if err != nil {
			return nil, err
		}
		if m != vfs.Fdatasync && !slices.Contains(methods, m) {
			methods = append(methods, m)
		}
	}
	var rows []methodRow
	for _, m := range methods {
		for _, level := range []int{1, 2, 0} {
			rows = append(rows, methodRow{level, m})
		}
	}
	return rows, nil
}

// label names a row as the article does, e.g. "innodb=2 + O_DIRECT".
func (r methodRow) label() string { return fmt.Sprintf("innodb=%d + %v", r.level, r.method) }

// planMethodRows queues s for each method row, with the row's level and
// method, and returns the cells in row order. A method the filesystem
// refuses leaves its cell empty (see skipUnsupported); present drops those.
func (e *env) planMethodRows(p *plan, what string, s func(methodRow) spec) []*cell {
	var out []*cell
	for _, row := range e.cfg.methods {
		pol, err := policy.InnoDB(row.level)
		if err != nil {
			panic(err) // levels 0, 1, 2 exist
		}
		sp := s(row)
		sp.pol, sp.method = pol, row.method
		out = append(out, p.add(e, what+": "+sp.name, sp))
	}
	return out
}

// skipUnsupported reports, with a warning, a job whose sync method (or,
// in the prepare experiment, whose fallocate mode) the filesystem refuses:
// walbench leaves that cell out rather than failing.
func (e *env) skipUnsupported(j *job, err error) bool {
	if !errors.Is(err, wal.ErrSyncMethodUnsupported) && !errors.Is(err, errNoAllocate) {
		return false
	}
	e.warnf("%s skipped: %v", j.what, err)
	return true
}

// present returns the cells that were measured.
func present(cells []*cell) []*cell {
	var out []*cell
	for _, c := range cells {
		if len(c.Rounds) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// methodGroups returns the * flag's groups for a table whose first base
// rows use fdatasync and whose others are sync-method rows: a method row is
// compared with the method row next to it, not with the last level.
func methodGroups(base, n int) []string {
	g := make([]string, n)
	for i := range g {
		g[i] = "fdatasync"
		if i >= base {
			g[i] = "method"
		}
	}
	return g
}

// levelOf returns the InnoDB level a method row's result ran at, from its name.
func levelOf(r result) int {
	var level int
	fmt.Sscanf(r.Name, "innodb=%d", &level)
	return level
}

// methodNote explains the sync-method rows under a table.
func methodNote(cells []*cell) string {
	rows := make([]result, len(cells))
	for i, c := range cells {
		rows[i] = c.first()
	}
	note := "Rows \"+ METHOD\" open the log with that innodb_flush_method (wal.Options.SyncMethod); the others use fdatasync. " +
		"O_DSYNC makes every write durable, so its commits issue no fsync; O_DIRECT writes bypass the page cache, " +
		"padded to whole blocks."
	for _, r := range rows {
		if r.Alignment > 1 {
			note += fmt.Sprintf(" Direct-I/O alignment %d bytes (%s).", r.Alignment, r.AlignmentSource)
			break
		}
	}
	var pad []string
	for _, r := range rows {
		if r.PaddingBytes > 0 && r.Commits > 0 {
			pad = append(pad, fmt.Sprintf("%s %s padding bytes per commit", r.Name, fmtRatio(float64(r.PaddingBytes)/float64(r.Commits))))
		}
	}
	if len(pad) > 0 {
		note += " " + strings.Join(pad, "; ") + "."
	}
	return note
}
