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
	TypeLost          = "lost"
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
	BootID string   `json:"boot_id,omitempty"`
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
	// WatchdogPID is the dead-man process of a --confirm apply.
	WatchdogPID int `json:"watchdog_pid,omitempty"`
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
	f    *os.File
	lock *os.File
	// writable is false for a shared, read-only open.
	writable bool
}

// Mode is how a journal is opened.
type Mode int

const (
	// ReadOnly takes a shared lock: concurrent readers, no writer.
	ReadOnly Mode = iota
	// ReadWrite takes the exclusive lock and creates the file if needed.
	ReadWrite
)

// Open opens and locks the journal at path. It does not wait: if another lowlat
// holds the lock, it fails with ErrLocked naming that process.
func Open(path string, mode Mode) (*Journal, error) {
	if mode == ReadWrite {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("journal %s: %w", path, err)
		}
	}
	lockPath := path + ".lock"
	flag, how := os.O_RDONLY, unix.LOCK_SH
	if mode == ReadWrite {
		flag, how = os.O_RDWR|os.O_CREATE, unix.LOCK_EX
	}
	lock, err := os.OpenFile(lockPath, flag, 0o644)
	if errors.Is(err, os.ErrNotExist) && mode == ReadOnly {
		// Nobody ever wrote a journal here: an empty read-only view.
		return &Journal{path: path}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal %s: open lock: %w", path, err)
	}
	if err := unix.Flock(int(lock.Fd()), how|unix.LOCK_NB); err != nil {
		holder := ""
		if b, _ := os.ReadFile(lockPath); len(bytes.TrimSpace(b)) > 0 {
			holder = " (pid " + strings.TrimSpace(string(b)) + ")"
		}
		lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("journal %s: %w%s: an apply or rollback is in progress", path, ErrLocked, holder)
		}
		return nil, fmt.Errorf("journal %s: lock: %w", path, err)
	}
	j := &Journal{path: path, lock: lock, writable: mode == ReadWrite}
	if mode == ReadWrite {
		lock.Truncate(0)
		lock.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		created := false
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			created = true
		}
		f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			j.Close()
			return nil, fmt.Errorf("journal %s: %w", path, err)
		}
		j.f = f
		if created {
			if err := atomicfile.SyncDir(filepath.Dir(path)); err != nil {
				j.Close()
				return nil, fmt.Errorf("journal %s: sync directory: %w", path, err)
			}
		}
	} else {
		f, err := os.Open(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			j.Close()
			return nil, fmt.Errorf("journal %s: %w", path, err)
		}
		j.f = f
	}
	return j, nil
}

// Path is the journal's file name.
func (j *Journal) Path() string { return j.path }

// Close releases the lock.
func (j *Journal) Close() error {
	if j.f != nil {
		j.f.Close()
	}
	if j.lock != nil {
		if j.writable {
			j.lock.Truncate(0)
		}
		return j.lock.Close()
	}
	return nil
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
