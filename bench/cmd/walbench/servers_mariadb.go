package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// mariadbServer is one mariadbd walbench starts in a fresh data directory
// (made by mariadb-install-db), bound to 127.0.0.1 on a free port, with the
// distribution's defaults (innodb_flush_method O_DIRECT, a 96 MiB redo
// log, the doublewrite buffer on) except what the experiment sets:
// innodb_flush_log_at_trx_commit per cell, and on the binlog server
// log_bin with sync_binlog=1.
type mariadbServer struct {
	binlog  bool
	bin     string // mariadbd
	install string // mariadb-install-db
	dir     string // data/, tmp/, error.log
	addr    string
	proc    *serverProc
	admin   *sql.DB // one connection for settings and counters
	once    lazyStart
	// dirtyPct is innodb_max_dirty_pages_pct as the server started,
	// restored after each settle.
	dirtyPct string
}

// mariadbInstall is how the experiment tells a user to get MariaDB.
const mariadbInstall = "apt-get install -y mariadb-server"

// mariadbDirs are searched after PATH, which for a user other than root
// often lacks the sbin directory mariadbd is installed in.
var mariadbDirs = []string{"/usr/sbin", "/usr/local/sbin", "/usr/local/mysql/bin"}

// findMariaDB returns the mariadbd and mariadb-install-db binaries, or
// errNotInstalled.
func findMariaDB() (bin, install string, err error) {
	look := func(name string) string {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		for _, d := range mariadbDirs {
			p := filepath.Join(d, name)
			if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
				return p
			}
		}
		return ""
	}
	bin, install = look("mariadbd"), look("mariadb-install-db")
	if bin == "" || install == "" {
		return "", "", fmt.Errorf("mariadbd %w (%s)", errNotInstalled, mariadbInstall)
	}
	return bin, install, nil
}

func (m *mariadbServer) name() string {
	if m.binlog {
		return "mariadbd (log_bin, sync_binlog=1)"
	}
	return "mariadbd"
}
func (m *mariadbServer) pid() int        { return m.proc.pid() }
func (m *mariadbServer) dataDir() string { return filepath.Join(m.dir, "data") }

// ensure starts the server on its first use.
func (m *mariadbServer) ensure(ctx context.Context) error {
	return m.once.do(func() error { return m.start(ctx) })
}

func (m *mariadbServer) start(ctx context.Context) error {
	tmp := filepath.Join(m.dir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	root := os.Geteuid() == 0
	args := []string{"--no-defaults", "--datadir=" + m.dataDir(), "--auth-root-authentication-method=normal", "--skip-test-db"}
	if root {
		args = append(args, "--user=root")
	}
	cmd := exec.CommandContext(ctx, m.install, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", m.install, err, out)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	m.addr = "127.0.0.1:" + strconv.Itoa(port)
	args = []string{
		"--no-defaults",
		"--datadir=" + m.dataDir(), "--tmpdir=" + tmp,
		"--bind-address=127.0.0.1", "--port=" + strconv.Itoa(port),
		"--socket=" + filepath.Join(m.dir, "mysqld.sock"), "--pid-file=" + filepath.Join(m.dir, "mysqld.pid"),
		"--log-error=" + filepath.Join(m.dir, "error.log"),
		"--innodb-flush-log-at-trx-commit=1",
	}
	if root {
		args = append(args, "--user=root")
	}
	if m.binlog {
		args = append(args, "--log-bin="+filepath.Join(m.dataDir(), "binlog"), "--server-id=1", "--sync-binlog=1")
	} else {
		args = append(args, "--skip-log-bin")
	}
	if m.proc, err = startProc(m.name(), m.bin, args, filepath.Join(m.dir, "stdout.log")); err != nil {
		return err
	}
	m.proc.log = filepath.Join(m.dir, "error.log")
	if m.admin, err = sql.Open("mysql", m.dsn("")); err != nil {
		return err
	}
	m.admin.SetMaxOpenConns(1)
	err = m.proc.waitReady(ctx, 60*time.Second, func() error {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return m.admin.PingContext(pctx)
	})
	if err != nil {
		return err
	}
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS walbench",
		"CREATE TABLE IF NOT EXISTS walbench.t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v MEDIUMBLOB NOT NULL) ENGINE=InnoDB",
	} {
		if _, err := m.admin.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %s: %w", m.name(), q, err)
		}
	}
	return m.admin.QueryRowContext(ctx, "SELECT @@GLOBAL.innodb_max_dirty_pages_pct").Scan(&m.dirtyPct)
}

// dsn is the driver's connection string: root over TCP, parameters
// interpolated on the client so that each INSERT is one round trip
// (COM_QUERY) instead of a prepare, an execute and a close.
func (m *mariadbServer) dsn(db string) string {
	c := mysql.NewConfig()
	c.User, c.Net, c.Addr, c.DBName = "root", "tcp", m.addr, db
	c.InterpolateParams = true
	c.Timeout, c.ReadTimeout, c.WriteTimeout = 5*time.Second, 60*time.Second, 60*time.Second
	return c.FormatDSN()
}

// setLevel sets innodb_flush_log_at_trx_commit for the next window.
func (m *mariadbServer) setLevel(ctx context.Context, level int) error {
	_, err := m.admin.ExecContext(ctx, fmt.Sprintf("SET GLOBAL innodb_flush_log_at_trx_commit = %d", level))
	if err != nil {
		return fmt.Errorf("%s: %w", m.name(), err)
	}
	return nil
}

// open connects n clients; commit(w, seq) makes client w INSERT one row
// holding the record, in autocommit mode, one round trip.
func (m *mariadbServer) open(ctx context.Context, n int, rec []byte) (commit func(ctx context.Context, w, seq int) error, closeAll func(), err error) {
	db, err := sql.Open("mysql", m.dsn("walbench"))
	if err != nil {
		return nil, nil, err
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	conns := make([]*sql.Conn, 0, n)
	closeAll = func() {
		for _, c := range conns {
			c.Close()
		}
		db.Close()
	}
	for range n {
		c, err := db.Conn(ctx)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("%s: %w", m.name(), err)
		}
		conns = append(conns, c)
	}
	commit = func(ctx context.Context, w, seq int) error {
		if _, err := conns[w].ExecContext(ctx, "INSERT INTO t (v) VALUES (?)", rec); err != nil {
			return fmt.Errorf("%s: INSERT: %w", m.name(), err)
		}
		return nil
	}
	return commit, closeAll, nil
}

// mariadbCounters are the global status counters the experiment reads.
// MariaDB has no Innodb_os_log_fsyncs (MySQL's counter): its
// Innodb_data_fsyncs counts every fsync/fdatasync InnoDB makes, the redo
// log's and the data files'. Binlog_group_commits counts binlog group
// commits, each one write and (sync_binlog=1) one fsync of the binlog.
var mariadbCounters = []string{"Innodb_data_fsyncs", "Innodb_log_writes", "Innodb_os_log_written", "Binlog_commits", "Binlog_group_commits"}

// counters reads mariadbCounters from SHOW GLOBAL STATUS.
func (m *mariadbServer) counters(ctx context.Context) (map[string]uint64, error) {
	rows, err := m.admin.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('"+strings.Join(mariadbCounters, "','")+"')")
	if err != nil {
		return nil, fmt.Errorf("%s: SHOW GLOBAL STATUS: %w", m.name(), err)
	}
	defer rows.Close()
	out := map[string]uint64{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: status %s: %q is not a count", m.name(), k, v)
		}
		out[k] = n
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, k := range mariadbCounters {
		if _, ok := out[k]; !ok {
			return nil, fmt.Errorf("%s: SHOW GLOBAL STATUS has no %s", m.name(), k)
		}
	}
	return out, nil
}

// settle has InnoDB write back every dirty page and purge the undo
// history the window left (innodb_max_dirty_pages_pct=0 until the buffer
// pool is clean), so that its page cleaner does not write during the next
// cell. It gives up after limit and reports how far it got.
func (m *mariadbServer) settle(ctx context.Context, limit time.Duration) error {
	if _, err := m.admin.ExecContext(ctx, "SET GLOBAL innodb_max_dirty_pages_pct = 0"); err != nil {
		return err
	}
	defer m.admin.ExecContext(context.WithoutCancel(ctx), "SET GLOBAL innodb_max_dirty_pages_pct = "+m.dirtyPct)
	var dirty, history string
	for deadline := time.Now().Add(limit); ; {
		err := m.admin.QueryRowContext(ctx, "SELECT "+
			"(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'INNODB_BUFFER_POOL_PAGES_DIRTY'), "+
			"(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'INNODB_HISTORY_LIST_LENGTH')").Scan(&dirty, &history)
		if err != nil {
			return err
		}
		if dirty == "0" && history == "0" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still had %s dirty pages and a history list of %s after %s", m.name(), dirty, history, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// close stops the server: SIGTERM is a clean shutdown.
func (m *mariadbServer) close() error {
	if m.admin != nil {
		m.admin.Close()
	}
	if m.proc == nil {
		return nil
	}
	return m.proc.stop(60 * time.Second)
}
