package journal

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func sample() []Record {
	return []Record{
		{Type: TypeBegin, Txn: "t1", Meta: &Meta{Profile: "game-udp", BootID: "b1"}},
		{Type: TypeIntent, Txn: "t1", Seq: 1, Knob: "sysctl/net.core.somaxconn", Before: "4096", After: "1024"},
		{Type: TypeIntent, Txn: "t1", Seq: 2, Knob: "qdisc/eth0/root", Before: "pfifo_fast @default", After: "fq_codel"},
		{Type: TypeCommit, Txn: "t1"},
	}
}

func writeJournal(t *testing.T, recs []Record) (*Journal, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal")
	j, err := Open(path, ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	for _, r := range recs {
		if err := j.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	return j, path
}

func TestRoundTripAndReplay(t *testing.T) {
	j, _ := writeJournal(t, sample())
	st, err := j.Load()
	if err != nil {
		t.Fatal(err)
	}
	if st.Torn != nil || len(st.Txns) != 1 {
		t.Fatalf("state = %+v", st)
	}
	tx := st.Txns[0]
	if tx.Status != Applied || len(tx.Intents) != 2 || tx.Intents[1].Before != "pfifo_fast @default" || tx.Meta.Profile != "game-udp" {
		t.Errorf("txn = %+v", tx)
	}
	if st.Latest() != tx || !tx.InBoot("b1") || tx.InBoot("b2") {
		t.Error("latest/boot bookkeeping")
	}
}

// TestTornTailAtEveryByte cuts the last record at every possible length: the
// earlier records must always load, and the cut line must be reported as torn
// (never silently accepted, never an error that blocks recovery).
func TestTornTailAtEveryByte(t *testing.T) {
	_, path := writeJournal(t, sample())
	full, _ := os.ReadFile(path)
	lines := bytes.SplitAfter(full, []byte("\n"))
	head := bytes.Join(lines[:3], nil)
	last := lines[3]
	for n := 1; n < len(last); n++ {
		data := append(append([]byte(nil), head...), last[:n]...)
		recs, torn, err := Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("cut at %d: %v", n, err)
		}
		if len(recs) != 3 || torn == nil || torn.Line != 4 || torn.Offset != int64(len(head)) {
			t.Fatalf("cut at %d: %d records, torn %+v", n, len(recs), torn)
		}
		st, err := Replay(recs)
		if err != nil || st.Txns[0].Status != Unfinished {
			t.Fatalf("cut at %d: without its commit the txn must be unfinished, got %v %v", n, st, err)
		}
	}
}

func TestCutTornThenAppend(t *testing.T) {
	j, path := writeJournal(t, sample()[:3])
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`deadbeef {"v":1,"type":"com`)
	f.Close()
	st, err := j.Load()
	if err != nil || st.Torn == nil {
		t.Fatalf("Load: %v torn=%v", err, st)
	}
	if err := j.CutTorn(st.Torn); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(Record{Type: TypeAbort, Txn: "t1", Error: "x"}); err != nil {
		t.Fatal(err)
	}
	st, err = j.Load()
	if err != nil || st.Torn != nil || st.Txns[0].Status != Aborted {
		t.Fatalf("after cut+append: %+v %v", st, err)
	}
}

func TestCorruptMiddleIsFatal(t *testing.T) {
	_, path := writeJournal(t, sample())
	b, _ := os.ReadFile(path)
	b = bytes.Replace(b, []byte(`"4096"`), []byte(`"4097"`), 1) // checksum now wrong
	_, _, err := Decode(bytes.NewReader(b))
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("err = %v, want ErrCorrupt naming line 2", err)
	}
}

func TestNewerVersionRefused(t *testing.T) {
	r := Record{V: Version + 1, Type: TypeBegin, Txn: "t9", Time: time.Now()}
	line, _ := encode(r) // encode keeps V as given; Append would stamp Version
	_, _, err := Decode(bytes.NewReader(line))
	if !errors.Is(err, ErrNewer) {
		t.Fatalf("err = %v, want ErrNewer", err)
	}
}

func TestLockExcludesSecondWriter(t *testing.T) {
	_, path := writeJournal(t, sample()[:1])
	_, err := Open(path, ReadWrite)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid") {
		t.Fatalf("second writer: %v, want ErrLocked naming the holder pid", err)
	}
	if _, err := Open(path, ReadOnly); !errors.Is(err, ErrLocked) {
		t.Fatalf("reader during a write: %v, want ErrLocked", err)
	}
}

func TestReplayStates(t *testing.T) {
	now := time.Now()
	deadline := now.Add(time.Minute)
	recs := []Record{
		{Type: TypeBegin, Txn: "a", Meta: &Meta{BootID: "b1"}},
		{Type: TypeIntent, Txn: "a", Seq: 1, Knob: "k1"},
		{Type: TypeAbort, Txn: "a", Error: "EINVAL"},
		{Type: TypeBegin, Txn: "b", Meta: &Meta{ConfirmBy: &deadline}},
		{Type: TypeCommit, Txn: "b"},
		{Type: TypeBegin, Txn: "c"},
		{Type: TypeCommit, Txn: "c"},
		{Type: TypeRollbackBegin, Txn: "c"},
		{Type: TypeRestored, Txn: "c", Seq: 1},
		{Type: TypeRollbackEnd, Txn: "c", Failed: []string{"k9"}},
		{Type: TypeBegin, Txn: "d"},
	}
	st, err := Replay(recs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Status{"a": Aborted, "b": Applied, "c": RollingBack, "d": Unfinished}
	for _, tx := range st.Txns {
		if tx.Status != want[tx.ID] {
			t.Errorf("%s: status %s, want %s", tx.ID, tx.Status, want[tx.ID])
		}
	}
	if !st.Txns[1].PendingConfirm() {
		t.Error("b awaits confirmation")
	}
	if got := len(st.Incomplete()); got != 2 {
		t.Errorf("incomplete = %d, want 2 (c, d)", got)
	}
	if _, err := Replay([]Record{{Type: TypeCommit, Txn: "zz"}}); !errors.Is(err, ErrCorrupt) {
		t.Error("a commit without begin must be corrupt")
	}
}

// TestReplayDeadline: a deadline record moves the transaction's confirm
// deadline (apply --hold re-arms it); one without a deadline is damage.
func TestReplayDeadline(t *testing.T) {
	first := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	later := first.Add(8 * 24 * time.Hour)
	st, err := Replay([]Record{
		{Type: TypeBegin, Txn: "h", Meta: &Meta{ConfirmBy: &first}},
		{Type: TypeCommit, Txn: "h"},
		{Type: TypeEvidence, Txn: "h", Evidence: &Evidence{Keep: true}},
		{Type: TypeDeadline, Txn: "h", ConfirmBy: &later},
	})
	if err != nil {
		t.Fatal(err)
	}
	if tx := st.Txns[0]; !tx.PendingConfirm() || !tx.Meta.ConfirmBy.Equal(later) {
		t.Errorf("after a deadline record: pending %v, confirm by %v, want %v", tx.PendingConfirm(), tx.Meta.ConfirmBy, later)
	}
	if _, err := Replay([]Record{{Type: TypeBegin, Txn: "h", Meta: &Meta{ConfirmBy: &first}}, {Type: TypeDeadline, Txn: "h"}}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a deadline record without its deadline: %v, want corrupt", err)
	}
}

func TestReplaySkippedIntent(t *testing.T) {
	st, err := Replay([]Record{
		{Type: TypeBegin, Txn: "s"},
		{Type: TypeIntent, Txn: "s", Seq: 1, Knob: "ethtool/eth0/coalesce/rx-usecs"},
		{Type: TypeSkipped, Txn: "s", Seq: 1, Knob: "ethtool/eth0/coalesce/rx-usecs", Error: "not writable here"},
		{Type: TypeIntent, Txn: "s", Seq: 2, Knob: "ethtool/eth0/ring/rx"},
		{Type: TypeCommit, Txn: "s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	tx := st.Txns[0]
	if tx.Status != Applied || len(tx.Intents) != 1 || tx.Intents[0].Seq != 2 {
		t.Errorf("a skipped intent must leave the transaction: %+v", tx)
	}
}

// TestNotAJournalIsRefusedUntouched: a path that holds something else is
// refused by every mode before anything is created, locked or written
// ('status --journal /etc/passwd' used to leave /etc/passwd.lock behind,
// and useradd then refused to run).
func TestNotAJournalIsRefusedUntouched(t *testing.T) {
	dir := t.TempDir()
	passwd := filepath.Join(dir, "passwd")
	content := "root:x:0:0:root:/root:/bin/bash\n"
	if err := os.WriteFile(passwd, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{passwd, fifo, dir} {
		for _, mode := range []Mode{ReadOnly, ReadWrite} {
			_, err := Open(path, mode)
			if !errors.Is(err, ErrNotJournal) || !strings.Contains(err.Error(), path) {
				t.Errorf("Open(%s, %v) = %v, want ErrNotJournal naming the path", path, mode, err)
			}
		}
		if _, err := Peek(path); !errors.Is(err, ErrNotJournal) {
			t.Errorf("Peek(%s) = %v", path, err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("the directory now holds %v: a refused open created something", entries)
	}
	if b, _ := os.ReadFile(passwd); string(b) != content {
		t.Errorf("passwd changed: %q", b)
	}
}

// TestReadOnlyCreatesNothing: a read-only open of a journal that does not
// exist reads as empty and leaves no file or directory behind.
func TestReadOnlyCreatesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	j, err := Open(filepath.Join(dir, "journal"), ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	st, err := j.Load()
	j.Close()
	if err != nil || len(st.Txns) != 0 {
		t.Fatalf("empty read-only view: %+v, %v", st, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("read-only open created %s: %v", dir, err)
	}
}

// TestReadOnlyReadsWithoutLockFile: a journal present with no lock file
// beside it (copied from another host, or an older lowlat's lock removed) is
// read, not reported empty.
func TestReadOnlyReadsWithoutLockFile(t *testing.T) {
	j, path := writeJournal(t, sample())
	j.Close()
	os.Remove(path + ".lock")
	st, err := ReadState(path)
	if err != nil || len(st.Txns) != 1 || st.Txns[0].Status != Applied {
		t.Fatalf("ReadState: %+v, %v; want the applied transaction", st, err)
	}
	if _, err := os.Stat(path + ".lock"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a lock file appeared beside the journal: %v", err)
	}
}

// TestPrivateModes: the journal is 0600 in a 0700 directory it creates, and
// an older lowlat's 0644 journal is tightened on its next write open.
func TestPrivateModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lowlat")
	path := filepath.Join(dir, "journal")
	j, err := Open(path, ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(sample()[0]); err != nil {
		t.Fatal(err)
	}
	j.Close()
	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %o", p, fi.Mode().Perm(), err, want)
		}
	}
	os.Chmod(path, 0o644)
	j, err = Open(path, ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("old 0644 journal left at %v", fi.Mode().Perm())
	}
}

// TestUnprivilegedUserCannotLock: the attack of the old lock file, a local
// user holding 'flock -s' on it to stop a dead-man rollback, fails: the user
// cannot open the journal at all. Runs as root (it needs another user).
func TestUnprivilegedUserCannotLock(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another user")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatal("setpriv (util-linux) is needed")
	}
	// Under a world-traversable directory, as /var/lib is.
	base, err := os.MkdirTemp("/tmp", "lowlat-lock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	path := filepath.Join(base, "state", "journal")
	j, err := Open(path, ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(sample()[0]); err != nil {
		t.Fatal(err)
	}
	j.Close()
	for _, target := range []string{path, path + ".lock", filepath.Dir(path)} {
		out, err := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "flock", "-n", "-s", target, "true").CombinedOutput()
		if err == nil {
			t.Errorf("user nobody took a shared lock on %s", target)
		} else if !strings.Contains(string(out), "ermission denied") {
			t.Errorf("flock %s as nobody: %v: %s (want permission denied)", target, err, out)
		}
	}
}

// TestHolderFromProcLocks: the lock holder is found by device and inode, a
// waiter is not a holder, and stacked filesystems fall back to the inode.
func TestHolderFromProcLocks(t *testing.T) {
	locks := `1: POSIX  ADVISORY  WRITE 600 fd:01:1234 0 EOF
2: FLOCK  ADVISORY  WRITE 4242 fd:01:5678 0 EOF
2: -> FLOCK  ADVISORY  WRITE 4343 fd:01:5678 0 EOF
3: FLOCK  ADVISORY  READ  777 00:2c:9999 0 EOF
`
	for _, tt := range []struct {
		major, minor uint32
		ino          uint64
		want         int
	}{{0xfd, 1, 5678, 4242}, {0xfd, 1, 1234, 0}, {0, 0x1d, 9999, 777}, {1, 2, 3, 0}} {
		if got := holderIn(locks, tt.major, tt.minor, tt.ino); got != tt.want {
			t.Errorf("holderIn(%x:%x:%d) = %d, want %d", tt.major, tt.minor, tt.ino, got, tt.want)
		}
	}
	// And for real: this process holds it.
	_, path := writeJournal(t, sample()[:1])
	_, err := Open(path, ReadWrite)
	var le *LockedError
	if !errors.As(err, &le) || le.Holder.PID != os.Getpid() {
		t.Fatalf("second open: %v, want LockedError naming pid %d", err, os.Getpid())
	}
	// Peek reads while the lock is held.
	pj, err := Peek(path)
	if err != nil {
		t.Fatal(err)
	}
	defer pj.Close()
	if _, err := pj.Load(); err != nil {
		t.Fatal(err)
	}
}

// TestReplayPartlyLost: a lost record with knobs takes only those out of the
// transaction, which stays applied; an older record without knobs takes all.
func TestReplayPartlyLost(t *testing.T) {
	recs := append(sample(),
		Record{Type: TypeIntent, Txn: "t1", Seq: 3, Knob: "dropin/gw.service/50-lowlat-cpus.conf", Before: "<absent>", After: "x"})
	recs[3], recs[4] = recs[4], recs[3] // the intent before the commit
	recs = append(recs, Record{Type: TypeLost, Txn: "t1", Knobs: []string{"sysctl/net.core.somaxconn", "qdisc/eth0/root"}, BootID: "b2"})
	st, err := Replay(recs)
	if err != nil {
		t.Fatal(err)
	}
	tx := st.Txns[0]
	if tx.Status != Applied || len(tx.Intents) != 1 || tx.Intents[0].Knob != "dropin/gw.service/50-lowlat-cpus.conf" || len(tx.Lost) != 2 {
		t.Fatalf("partly lost: status %s intents %+v lost %+v", tx.Status, tx.Intents, tx.Lost)
	}
	old := append(sample(), Record{Type: TypeLost, Txn: "t1"})
	st, _ = Replay(old)
	if st.Txns[0].Status != Lost || len(st.Txns[0].Intents) != 0 {
		t.Errorf("old lost record: %+v", st.Txns[0])
	}
}

// TestEmptyFileIsNotAJournal: an empty file lowlat did not create ('status
// --journal /etc/motd', a typo'd path) is refused by every mode before it
// is locked, chmodded or written, whatever its mode.
func TestEmptyFileIsNotAJournal(t *testing.T) {
	for _, tt := range []struct {
		name          string
		dirMode, mode os.FileMode
		wantMode      os.FileMode
	}{
		{"config file", 0o755, 0o644, 0o644},
		{"private file", 0o700, 0o600, 0o600},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			if err := os.Mkdir(dir, tt.dirMode); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "motd")
			if err := os.WriteFile(path, nil, tt.mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, tt.mode)
			for _, mode := range []Mode{ReadOnly, ReadWrite} {
				j, err := Open(path, mode)
				if !errors.Is(err, ErrNotJournal) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "empty") {
					t.Errorf("Open(%v) = %v, want ErrNotJournal naming the path and saying it is empty", mode, err)
				}
				if err == nil {
					j.Append(sample()[0])
					j.Close()
				}
			}
			if _, err := Peek(path); !errors.Is(err, ErrNotJournal) {
				t.Errorf("Peek = %v", err)
			}
			fi, err := os.Stat(path)
			if err != nil || fi.Size() != 0 || fi.Mode().Perm() != tt.wantMode {
				t.Errorf("the file after the refused opens: %v, %v; want empty, mode %o", fi.Mode(), err, tt.wantMode)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Errorf("the directory now holds %v", ents)
			}
		})
	}
}

// TestCreateWritesFirstRecord: a read-write open creates nothing until the
// first record, which the journal is created with, locked from its first
// moment and 0600; no temporary file is left beside it.
func TestCreateWritesFirstRecord(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	path := filepath.Join(dir, "journal")
	j, err := Open(path, ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := j.Load(); err != nil || len(st.Txns) != 0 {
		t.Fatalf("a journal not created yet: %+v, %v", st, err)
	}
	j.Close()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an open with nothing appended left %s: %v", path, err)
	}

	j, err = Open(path, ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.Append(sample()[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, ReadOnly); !errors.Is(err, ErrLocked) {
		t.Errorf("a reader of the journal just created: %v, want ErrLocked", err)
	}
	if err := j.Append(sample()[1]); err != nil {
		t.Fatal(err)
	}
	st, err := peekState(t, path)
	if err != nil || len(st.Txns) != 1 || len(st.Txns[0].Intents) != 1 {
		t.Errorf("journal after two appends: %+v, %v", st, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("journal mode: %v, %v", fi, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("beside the journal: %v", ents)
	}
}

// peekState reads path without the lock.
func peekState(t *testing.T, path string) (*State, error) {
	t.Helper()
	j, err := Peek(path)
	if err != nil {
		return nil, err
	}
	defer j.Close()
	return j.Load()
}

// TestCreateRaceAndCrash: of two writers that both found no journal, the
// second to append fails as locked and writes nothing; the temporary file
// of a create that died before its link is removed by the next create, and
// one a live create holds is not.
func TestCreateRaceAndCrash(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal")
	// A create killed before its link.
	stale := path + tempInfix + "dead"
	if err := os.WriteFile(stale, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A create in progress (it holds its temporary file's lock).
	live := path + tempInfix + "live"
	lf, err := os.OpenFile(live, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}

	j1, err := Open(path, ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer j1.Close()
	j2, err := Open(path, ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if err := j1.Append(sample()[0]); err != nil {
		t.Fatal(err)
	}
	r := sample()[0]
	r.Txn = "t2"
	if err := j2.Append(r); !errors.Is(err, ErrLocked) {
		t.Errorf("second creator: %v, want ErrLocked", err)
	}
	st, err := peekState(t, path)
	if err != nil || len(st.Txns) != 1 || st.Txns[0].ID != "t1" {
		t.Errorf("journal: %+v, %v; want t1 only", st, err)
	}
	if _, err := os.Lstat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead create's temporary file is still there: %v", err)
	}
	if _, err := os.Lstat(live); err != nil {
		t.Errorf("the live create's temporary file was removed: %v", err)
	}
}

// TestOlderEmptyJournal: an older lowlat left lowlat's own journal empty (a
// root status created it; or it died between creating and writing it):
// it is taken as the empty journal it is, tightened and written to.
func TestOlderEmptyJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	saved := ownEmpty
	ownEmpty = func(p string) bool { return p == path }
	t.Cleanup(func() { ownEmpty = saved })
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o644)
	if st, err := ReadState(path); err != nil || len(st.Txns) != 0 {
		t.Fatalf("read-only: %+v, %v", st, err)
	}
	j, err := Open(path, ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(sample()[0]); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %o", fi.Mode().Perm())
	}
	if st, err := ReadState(path); err != nil || len(st.Txns) != 1 {
		t.Errorf("after the append: %+v, %v", st, err)
	}
}
