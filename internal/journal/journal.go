// Package journal is lowlat's crash-safe record of what it changed. Before any
// knob is written, an intent {txn, knob, before, after} is appended and fsynced,
// so whatever happens next (an error, kill -9, a power cut) the previous value
// is on disk and rollback can restore it. The file is append-only text, one
// checksummed JSON record per line, readable with less(1).
//
// Replaying the records gives the State: every transaction with its intents and
// whether it is open (an apply that never finished), applied, rolled back,
// aborted or lost at a reboot. A torn last line (the process died inside a
// write) is reported, never silently dropped; a damaged line anywhere else stops
// everything, because guessing would risk restoring the wrong values.
package journal

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lowlat/lowlat/internal/atomicfile"
)

// Version is the record format this lowlat writes and understands.
const Version = 1

// DefaultPath is where the journal lives unless overridden (--journal,
// LOWLAT_JOURNAL). /var/lib survives reboots, unlike tuned's /run.
const DefaultPath = "/var/lib/lowlat/journal"

// Record types.
const (
	TypeBegin  = "begin"
	TypeIntent = "intent"
	// TypeSkipped follows an intent whose knob the host refused outright
	// (nothing was written): the intent is not part of the transaction.
	TypeSkipped       = "skipped"
	TypeCommit        = "commit"
	TypeAbort         = "abort"
	TypeConfirm       = "confirm"
	TypeRollbackBegin = "rollback-begin"
	TypeRestored      = "restored"
	TypeRollbackEnd   = "rollback-end"
	TypeReapply       = "reapply"
	// TypeEvidence records what a gate (apply --prove, lowlat prove)
	// measured before and after the transaction, and its verdict.
	TypeEvidence = "evidence"
	// TypeLost records the knobs of a transaction that a reboot put back
	// (Knobs; a record without Knobs, as older lowlat wrote it, means all).
	TypeLost = "lost"
	// TypeDeadline moves the dead-man deadline of a transaction awaiting
	// confirmation to ConfirmBy (apply --prove --hold, when the gate keeps
	// the change): its watchdog, woken at the old deadline, waits for this
	// one instead.
	TypeDeadline = "deadline"
)

// Record is one line of the journal.
type Record struct {
	V      int       `json:"v"`
	Type   string    `json:"type"`
	Txn    string    `json:"txn"`
	Time   time.Time `json:"time"`
	Seq    int       `json:"seq,omitempty"`
	Knob   string    `json:"knob,omitempty"`
	Before string    `json:"before,omitempty"`
	After  string    `json:"after,omitempty"`
	Meta   *Meta     `json:"meta,omitempty"`
	Error  string    `json:"error,omitempty"`
	// Failed lists knobs a rollback could not restore.
	Failed []string `json:"failed,omitempty"`
	// Knobs lists the knobs a lost record is about.
	Knobs []string `json:"knobs,omitempty"`
	// Evidence is an evidence record's measurements and verdict.
	Evidence *Evidence `json:"evidence,omitempty"`
	BootID   string    `json:"boot_id,omitempty"`
	// ConfirmBy is a deadline record's new deadline.
	ConfirmBy *time.Time `json:"confirm_by,omitempty"`
}

// Meta describes a transaction: what asked for it and on which host.
type Meta struct {
	Profile   string            `json:"profile,omitempty"`
	Params    map[string]string `json:"params,omitempty"`
	Sets      map[string]string `json:"sets,omitempty"`
	Ifaces    []string          `json:"ifaces,omitempty"`
	Host      string            `json:"host,omitempty"`
	BootID    string            `json:"boot_id,omitempty"`
	PID       int               `json:"pid,omitempty"`
	Tool      string            `json:"tool,omitempty"`
	Args      []string          `json:"args,omitempty"`
	ConfirmBy *time.Time        `json:"confirm_by,omitempty"`
	Persist   bool              `json:"persist,omitempty"`
	// Force let the apply replace values lowlat cannot recreate exactly
	// (knob.Restorer); their rollback gives the kernel's default instead.
	Force bool `json:"force,omitempty"`
	// Deferred are changes made only when the transaction is confirmed:
	// the files that make a --confirm --persist apply survive a reboot, so
	// that nothing of an unconfirmed transaction comes back at boot.
	Deferred []Change `json:"deferred,omitempty"`
	// WatchdogPID is the dead-man process of a --confirm apply.
	WatchdogPID int `json:"watchdog_pid,omitempty"`
}

// Evidence is what a gate measured before and after a transaction, and what
// it decided: the proof kept with the change, or with its rollback.
type Evidence struct {
	// Probe is the probe command line ("udp 10.0.0.1:7431 --interval 10ms").
	Probe string `json:"probe"`
	// SLO is the objective as given ("p99<=8ms,loss<=1%"), "" for the
	// default "not worse on p50, p99 and loss".
	SLO string `json:"slo,omitempty"`
	// Before and After are the figures of each run, by metric name.
	Before map[string]Figure `json:"before"`
	After  map[string]Figure `json:"after"`
	// Keep is the verdict: true kept (confirmed), false rolled back.
	Keep bool `json:"keep"`
	// Reason says it in one line.
	Reason string `json:"reason"`
}

// Figure is one metric of a measurement with its confidence interval.
type Figure struct {
	Value float64 `json:"value"`
	Lo    float64 `json:"lo"`
	Hi    float64 `json:"hi"`
	Unit  string  `json:"unit"`
}

// Change is one knob and the value to give it.
type Change struct {
	Knob  string `json:"knob"`
	Value string `json:"value"`
}

// Errors callers can test for with errors.Is.
var (
	ErrLocked  = errors.New("journal is locked by another lowlat")
	ErrNewer   = errors.New("journal written by a newer lowlat")
	ErrCorrupt = errors.New("journal is damaged")
)

// Journal is an open journal file, locked for this process.
type Journal struct {
	path string
	// f is the journal itself; nil when the open found no journal (a
	// read-write one creates it with its first record: see create).
	f *os.File
	// writable is false for a shared, read-only open.
	writable bool
	// locked is false for a Peek: a snapshot read without the lock.
	locked bool
}

// Mode is how a journal is opened.
type Mode int

const (
	// ReadOnly takes a shared lock: concurrent readers, no writer. It never
	// creates anything: a journal that does not exist reads as empty.
	ReadOnly Mode = iota
	// ReadWrite takes the exclusive lock. A journal that does not exist
	// reads as empty and is created by the first Append, with that record
	// already in it (create): lowlat never leaves an empty journal behind,
	// so an empty file is never one lowlat made (see openFile).
	ReadWrite
)

// File modes of what lowlat creates: the journal holds the values a
// rollback writes back as root, and whoever can lock it can hold off a
// dead-man rollback, so only root may open it.
const (
	fileMode = 0o600
	dirMode  = 0o700
)

// Open opens and locks the journal at path. The lock is a flock(2) on the
// journal file itself: there is no lock file beside it, and only those who
// can open the journal (root: it is 0600 in a 0700 directory) can take it.
// Open does not wait: if another process holds the lock, it fails with
// ErrLocked naming that process.
//
// A path that exists but is not a lowlat journal (not a regular file, an
// empty file, or one whose first line is not a journal record) is refused
// before anything is locked, created, chmodded or written.
func Open(path string, mode Mode) (*Journal, error) {
	f, err := openFile(path, mode)
	if err != nil {
		return nil, err
	}
	if f == nil {
		return &Journal{path: path, writable: mode == ReadWrite}, nil
	}
	how := unix.LOCK_SH
	if mode == ReadWrite {
		how = unix.LOCK_EX
	}
	if err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB); err != nil {
		holder := Holder(f)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			msg := ""
			if holder.PID > 0 {
				msg = " (" + holder.String() + ")"
			}
			return nil, &LockedError{Path: path, Holder: holder, err: fmt.Errorf("journal %s: %w%s: an apply or rollback is in progress", path, ErrLocked, msg)}
		}
		return nil, fmt.Errorf("journal %s: lock: %w", path, err)
	}
	return &Journal{path: path, f: f, writable: mode == ReadWrite, locked: true}, nil
}

// Peek opens the journal for reading without taking the lock, for a status
// report while another process holds it. The journal is append-only, so what
// Peek reads is a consistent prefix, but for a last line being written right
// now (reported as Torn, never cut).
func Peek(path string) (*Journal, error) {
	f, err := openFile(path, ReadOnly)
	if err != nil {
		return nil, err
	}
	return &Journal{path: path, f: f}, nil
}

// openFile opens an existing journal file: read-only, or read-write for
// appending. It returns nil when there is none (ReadWrite creates it at the
// first Append). Either way it checks first that the file is a lowlat
// journal, and only then touches it (tightening an older lowlat's 0644).
func openFile(path string, mode Mode) (*os.File, error) {
	// O_NONBLOCK: a FIFO given as --journal must not hang the open.
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		// Nobody ever wrote a journal here: an empty view.
		return nil, nil
	case errors.Is(err, os.ErrPermission):
		return nil, fmt.Errorf("journal %s: %w (only root can read lowlat's journal)", path, err)
	case err != nil:
		return nil, fmt.Errorf("journal %s: %w", path, err)
	}
	if err := checkJournal(f, path); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal %s: %w", path, err)
	}
	if mode == ReadOnly {
		return f, nil
	}
	f.Close()
	if err := mkdirPrivate(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("journal %s: %w", path, err)
	}
	f, err = os.OpenFile(path, os.O_RDWR|os.O_APPEND|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // removed in between: created again at the first Append
	}
	if err != nil {
		return nil, fmt.Errorf("journal %s: %w", path, err)
	}
	// Checked again on the file actually opened: it may have been replaced
	// in between.
	fi, err := f.Stat()
	if err == nil {
		err = checkJournal(f, path)
	}
	if err == nil && fi.Mode().Perm()&0o077 != 0 {
		// A journal from an older lowlat (0644): tighten it.
		err = f.Chmod(fileMode)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("journal %s: %w", path, err)
	}
	return f, nil
}

// create makes the journal with its first record already in it, so that no
// crash can leave an empty journal, nor one whose first line is not a
// record: the record is written and fsynced to a private temporary file
// beside the journal, locked exclusively, which is then hard-linked to the
// journal's name (link(2) fails if the name exists: a journal another
// lowlat created in the meantime is never replaced). The lock, taken on the
// new inode before it has a name, is held from the journal's first moment.
// A crash before the link leaves only the temporary file, whose record
// announced no change yet (knobs are written after their intent, which
// comes after it): the next create removes it.
func (j *Journal) create(line []byte) error {
	dir := filepath.Dir(j.path)
	if err := mkdirPrivate(dir); err != nil {
		return fmt.Errorf("journal %s: %w", j.path, err)
	}
	removeStaleTemps(j.path)
	b := make([]byte, 4)
	rand.Read(b)
	tmp := j.path + tempInfix + hex.EncodeToString(b)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC, fileMode)
	if err != nil {
		return fmt.Errorf("journal %s: create: %w", j.path, err)
	}
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if err == nil {
		_, err = f.Write(line)
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = os.Link(tmp, j.path)
	}
	os.Remove(tmp)
	if err == nil {
		err = atomicfile.SyncDir(dir)
	}
	if err != nil {
		f.Close()
		if errors.Is(err, os.ErrExist) {
			return &LockedError{Path: j.path, err: fmt.Errorf("journal %s: %w: another lowlat created it just now; nothing was written", j.path, ErrLocked)}
		}
		return fmt.Errorf("journal %s: create: %w", j.path, err)
	}
	j.f, j.locked = f, true
	return nil
}

// tempInfix names create's temporary files: "<journal>.new-<random>".
const tempInfix = ".new-"

// removeStaleTemps removes the temporary files of creates that died before
// linking theirs (a live one holds its lock, and is left alone).
func removeStaleTemps(path string) {
	dir, prefix := filepath.Dir(path), filepath.Base(path)+tempInfix
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			os.Remove(p)
		}
		f.Close()
	}
}

// mkdirPrivate creates dir and its missing parents 0700. lowlat's own state
// directory (that of DefaultPath) is tightened to 0700 when an older lowlat
// made it 0755; any other existing directory is left as its owner set it.
func mkdirPrivate(dir string) error {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return err
	}
	if dir != filepath.Dir(DefaultPath) {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if fi.Mode().Perm() != dirMode {
		return os.Chmod(dir, dirMode)
	}
	return nil
}

// ErrNotJournal is returned for a path that holds something else than a
// lowlat journal.
var ErrNotJournal = errors.New("not a lowlat journal")

// ownEmpty reports whether an empty file at path is an older lowlat's empty
// journal: only at DefaultPath (a variable for the tests).
var ownEmpty = func(path string) bool { return filepath.Clean(path) == DefaultPath }

// checkJournal refuses anything but a regular file that starts with a
// journal record. It reads only the first line, and leaves f at 0.
//
// An empty file is not a journal: lowlat creates its journal with its first
// record (create). An older lowlat did leave empty journals (a root status
// or rollback with nothing to do created the file; so did a crash between
// creating it and writing to it), so one at lowlat's own DefaultPath, in
// lowlat's own directory, is taken as its empty journal. Anywhere else an
// empty file may be anybody's ('--journal /etc/motd'), and it is refused:
// nothing in it tells lowlat's from another's, and an empty journal holds
// nothing, so removing one an older lowlat left loses nothing.
func checkJournal(f *os.File, path string) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: it is a %s, not a regular file", ErrNotJournal, fileType(fi.Mode()))
	}
	if fi.Size() == 0 {
		if ownEmpty(path) {
			return nil
		}
		return fmt.Errorf("%w: it is an empty file, and lowlat writes its journal with its first record; if an older lowlat left it empty, remove it (it holds nothing)", ErrNotJournal)
	}
	first, err := bufio.NewReaderSize(io.LimitReader(f, 1<<20), 4096).ReadBytes('\n')
	if _, serr := f.Seek(0, io.SeekStart); serr != nil {
		return serr
	}
	if err != nil && err != io.EOF {
		return err
	}
	if _, reason := parseLine(first, err == nil); reason != "" {
		if err == io.EOF && fi.Size() < 4096 && !bytes.ContainsAny(first, "\n") && looksLikeRecordStart(first) {
			// One torn record and nothing else: an apply killed inside
			// its very first write. Still ours.
			return nil
		}
		return fmt.Errorf("%w: line 1: %s", ErrNotJournal, reason)
	}
	return nil
}

// looksLikeRecordStart reports whether b begins like "<8 hex> {".
func looksLikeRecordStart(b []byte) bool {
	if len(b) < 10 || b[8] != ' ' || b[9] != '{' {
		return false
	}
	_, err := strconv.ParseUint(string(b[:8]), 16, 32)
	return err == nil
}

func fileType(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&os.ModeNamedPipe != 0:
		return "FIFO"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// LockedError is ErrLocked with the process that holds the lock.
type LockedError struct {
	Path   string
	Holder Process
	err    error
}

func (e *LockedError) Error() string { return e.err.Error() }
func (e *LockedError) Unwrap() error { return e.err }

// Process is a process holding a journal lock.
type Process struct {
	PID int
	// Cmdline is its command line, space-separated ("" when unreadable).
	Cmdline string
}

func (p Process) String() string {
	if p.Cmdline == "" {
		return "pid " + strconv.Itoa(p.PID)
	}
	return "pid " + strconv.Itoa(p.PID) + ": " + p.Cmdline
}

// Holder finds the process holding a flock on f's file in /proc/locks (zero
// when none or unknown).
func Holder(f *os.File) Process {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return Process{}
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return Process{}
	}
	pid := holderIn(string(b), uint32(unix.Major(uint64(st.Dev))), uint32(unix.Minor(uint64(st.Dev))), st.Ino)
	if pid <= 0 {
		return Process{}
	}
	p := Process{PID: pid}
	if c, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil {
		p.Cmdline = strings.TrimSpace(strings.ReplaceAll(string(c), "\x00", " "))
	}
	return p
}

// holderIn parses /proc/locks ("1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF")
// for the process holding a flock on the inode; a waiting lock ("->") is not
// a holder.
func holderIn(locks string, major, minor uint32, ino uint64) int {
	want := fmt.Sprintf("%02x:%02x:%d", major, minor, ino)
	suffix := fmt.Sprintf(":%d", ino)
	byInode := 0
	for _, line := range strings.Split(locks, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "FLOCK" {
			continue
		}
		pid, _ := strconv.Atoi(f[4])
		if f[5] == want {
			return pid
		}
		// Stacked filesystems (overlayfs) list the lower device: fall
		// back to the inode alone.
		if strings.HasSuffix(f[5], suffix) && byInode == 0 {
			byInode = pid
		}
	}
	return byInode
}

// Path is the journal's file name.
func (j *Journal) Path() string { return j.path }

// Close releases the lock.
func (j *Journal) Close() error {
	if j.f == nil {
		return nil
	}
	return j.f.Close()
}

// Append writes one record and fsyncs it. Only after Append returns may the
// change it describes be made.
func (j *Journal) Append(r Record) error {
	if !j.writable {
		return fmt.Errorf("journal %s: opened read-only", j.path)
	}
	r.V = Version
	if r.Time.IsZero() {
		r.Time = time.Now().UTC()
	}
	line, err := encode(r)
	if err != nil {
		return fmt.Errorf("journal %s: encode %s: %w", j.path, r.Type, err)
	}
	if j.f == nil {
		return j.create(line)
	}
	if _, err := j.f.Write(line); err != nil {
		return fmt.Errorf("journal %s: append %s: %w", j.path, r.Type, err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("journal %s: fsync: %w", j.path, err)
	}
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encode renders "<crc32c of json, 8 hex> <json>\n".
func encode(r Record) ([]byte, error) {
	js, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(js)+10)
	out = fmt.Appendf(out, "%08x ", crc32.Checksum(js, castagnoli))
	out = append(out, js...)
	return append(out, '\n'), nil
}

// Torn describes a damaged last line: the process died inside a write. The
// change that record announced was never started (a knob is written only after
// its intent is on disk), so the line can be cut off safely, but only a
// command that is about to recover (rollback, status as root) does so.
type Torn struct {
	Line   int
	Offset int64
	Reason string
}

func (t *Torn) String() string {
	return fmt.Sprintf("line %d (offset %d) is incomplete: %s", t.Line, t.Offset, t.Reason)
}

// Load reads and replays the whole journal.
func (j *Journal) Load() (*State, error) {
	if j.f == nil {
		return &State{}, nil
	}
	if _, err := j.f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("journal %s: %w", j.path, err)
	}
	recs, torn, err := Decode(j.f)
	if err != nil {
		return nil, fmt.Errorf("journal %s: %w", j.path, err)
	}
	st, err := Replay(recs)
	if err != nil {
		return nil, fmt.Errorf("journal %s: %w", j.path, err)
	}
	st.Torn = torn
	return st, nil
}

// Decode parses journal lines. A bad final line is returned as Torn; a bad line
// anywhere else is ErrCorrupt; a record from a newer format is ErrNewer.
func Decode(r io.Reader) ([]Record, *Torn, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var recs []Record
	var offset int64
	var pending *Torn
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if len(b) == 0 && err == io.EOF {
			return recs, pending, nil
		}
		if err != nil && err != io.EOF {
			return nil, nil, err
		}
		if pending != nil {
			// The damaged line was not the last one.
			return nil, nil, fmt.Errorf("%w: line %d (offset %d): %s", ErrCorrupt, pending.Line, pending.Offset, pending.Reason)
		}
		complete := err == nil
		rec, reason := parseLine(b, complete)
		if reason != "" {
			pending = &Torn{Line: line, Offset: offset, Reason: reason}
		} else {
			if rec.V > Version {
				return nil, nil, fmt.Errorf("%w: line %d is format v%d, this lowlat reads v%d; upgrade lowlat before touching it", ErrNewer, line, rec.V, Version)
			}
			recs = append(recs, rec)
		}
		offset += int64(len(b))
		if !complete {
			return recs, pending, nil
		}
	}
}

func parseLine(b []byte, complete bool) (Record, string) {
	if !complete {
		return Record{}, "no newline (truncated write)"
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	sum, js, ok := bytes.Cut(b, []byte(" "))
	if !ok || len(sum) != 8 {
		return Record{}, "no checksum"
	}
	want, err := strconv.ParseUint(string(sum), 16, 32)
	if err != nil {
		return Record{}, "bad checksum field"
	}
	if crc32.Checksum(js, castagnoli) != uint32(want) {
		return Record{}, "checksum mismatch"
	}
	var r Record
	if err := json.Unmarshal(js, &r); err != nil {
		return Record{}, "bad JSON: " + err.Error()
	}
	if r.Type == "" || r.Txn == "" {
		return Record{}, "record without type or txn"
	}
	return r, ""
}

// CutTorn removes a torn last line so new records start on a clean line.
func (j *Journal) CutTorn(t *Torn) error {
	if t == nil {
		return nil
	}
	if !j.writable {
		return fmt.Errorf("journal %s: opened read-only", j.path)
	}
	if err := j.f.Truncate(t.Offset); err != nil {
		return fmt.Errorf("journal %s: cut torn line %d: %w", j.path, t.Line, err)
	}
	return j.f.Sync()
}

// NewTxnID returns a sortable, readable transaction id.
func NewTxnID(now time.Time) string {
	b := make([]byte, 3)
	rand.Read(b)
	return now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b)
}

// ReadState opens the journal at path read-only, replays it and closes it.
func ReadState(path string) (*State, error) {
	j, err := Open(path, ReadOnly)
	if err != nil {
		return nil, err
	}
	defer j.Close()
	return j.Load()
}
