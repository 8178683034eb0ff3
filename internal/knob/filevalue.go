package knob

import (
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
)

// FileValue is the value of a file (or drop-in) knob: a regular file's
// content with its mode and owner, or its absence. Its text form keeps the
// two apart, so no content, however odd, reads as Absent:
//
//	mode=0644 owner=0:0
//	<content...>
//
// or Absent, or "<absent; no DIR>" when the directory DIR on the file's
// path did not exist either (writing that value removes the file and then
// DIR again, once it is empty). A desired value may leave the owner out
// ("mode=0644\n..."): whoever writes it (root) owns it.
type FileValue struct {
	Absent bool
	// NoDir is, for an absent file, the topmost directory of its path that
	// did not exist.
	NoDir string
	// Mode holds the permission bits (0644) and set-id/sticky bits.
	Mode fs.FileMode
	// UID and GID are the owner; -1 when not given.
	UID, GID int
	Content  string
	// Legacy is a value an older lowlat recorded: the bare content, with no
	// mode or owner.
	Legacy bool
}

// FileContent is the desired value of a file knob with content and mode.
func FileContent(content string, mode fs.FileMode) string {
	return FileValue{Mode: mode, UID: -1, GID: -1, Content: content}.String()
}

const absentNoDirPrefix = "<absent; no "

// IsAbsent reports whether v is an absent file's value (with or without
// the directory it lacked).
func IsAbsent(v string) bool {
	return v == Absent || (strings.HasPrefix(v, absentNoDirPrefix) && strings.HasSuffix(v, ">"))
}

func (v FileValue) String() string {
	if v.Absent {
		if v.NoDir != "" {
			return absentNoDirPrefix + v.NoDir + ">"
		}
		return Absent
	}
	if v.Legacy {
		return v.Content
	}
	head := "mode=" + formatMode(v.Mode)
	if v.UID >= 0 && v.GID >= 0 {
		head += fmt.Sprintf(" owner=%d:%d", v.UID, v.GID)
	}
	return head + "\n" + v.Content
}

var fileHeadRE = regexp.MustCompile(`^mode=(0[0-7]{3,4})(?: owner=(\d+):(\d+))?\n`)

// ParseFileValue reads a file knob's value. A value without the mode line is
// an older lowlat's bare content (Legacy).
func ParseFileValue(s string) FileValue {
	if IsAbsent(s) {
		v := FileValue{Absent: true, UID: -1, GID: -1}
		if s != Absent {
			v.NoDir = strings.TrimSuffix(strings.TrimPrefix(s, absentNoDirPrefix), ">")
		}
		return v
	}
	m := fileHeadRE.FindStringSubmatch(s)
	if m == nil {
		return FileValue{Mode: 0o644, UID: -1, GID: -1, Content: s, Legacy: true}
	}
	perm, _ := strconv.ParseUint(m[1], 8, 32)
	v := FileValue{Mode: modeFromUnix(uint32(perm)), UID: -1, GID: -1, Content: s[len(m[0]):]}
	if m[2] != "" {
		v.UID, _ = strconv.Atoi(m[2])
		v.GID, _ = strconv.Atoi(m[3])
	}
	return v
}

// satisfies reports whether live (as read) meets want: the same content,
// and the mode and owner where want gives them.
func (live FileValue) satisfies(want FileValue) bool {
	if live.Absent || want.Absent {
		return live.Absent == want.Absent
	}
	if live.Content != want.Content {
		return false
	}
	if !want.Legacy && live.Mode != want.Mode {
		return false
	}
	if want.UID >= 0 && (live.UID != want.UID || live.GID != want.GID) {
		return false
	}
	return true
}

// same is exact equality for a restore: content, mode and owner. The
// directory an absent value names does not count: it is removed when it is
// empty, and left to whoever put something else in it meanwhile.
// A value an older lowlat recorded carries no mode or owner: only its content
// counts.
func (a FileValue) same(b FileValue) bool {
	if a.Absent || b.Absent {
		return a.Absent == b.Absent
	}
	if a.Content != b.Content {
		return false
	}
	if a.Legacy || b.Legacy {
		return true
	}
	return a.Mode == b.Mode && (a.UID < 0 || b.UID < 0 || (a.UID == b.UID && a.GID == b.GID))
}

func formatMode(m fs.FileMode) string {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		u |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		u |= 0o1000
	}
	return fmt.Sprintf("%04o", u)
}

func modeFromUnix(u uint32) fs.FileMode {
	m := fs.FileMode(u & 0o777)
	if u&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if u&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if u&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}
