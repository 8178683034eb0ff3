//go:build linux

package packages

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/testnet"
)

// TestFleetConfirmOverNewConnection plays the canary without a gate on one
// host over real SSH with ControlPersist, Ansible's default, while the
// change breaks new connections to the host: right after lowlat applies it,
// the host's sshd stops accepting (its listener ends), and the session that
// runs the task, and the controller's persistent connection, carry on. The
// role's "host still answers" confirm must open a new connection, fail to,
// and leave the change unconfirmed: the host's dead-man switch rolls it
// back at its deadline.
func TestFleetConfirmOverNewConnection(t *testing.T) {
	testnet.Heavy(t, "sshd in a namespace, an Ansible play over ControlPersist, a dead-man switch")
	if os.Geteuid() != 0 {
		t.Skip("runs sshd in namespaces: run as root (make test does)")
	}
	for _, tool := range []string{"ansible-playbook", "/usr/sbin/sshd", "ssh-keygen", "ssh"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: make deps installs it (Debian packages ansible-core, openssh-server, openssh-client)", tool)
		}
	}
	bin := packagedBinary(t)
	dir := t.TempDir()
	collection(t, dir)
	sshKeys(t, dir)

	ctl, h := testnet.New(t), testnet.New(t)
	uplink(t, h)
	h.Veth(t, "mg0", "c1", ctl, 1)
	for _, c := range []struct {
		ns        *testnet.NS
		addr, dev string
	}{{h, "10.100.9.2/24", "mg0"}, {ctl, "10.100.9.1/24", "c1"}} {
		if out, err := c.ns.Command("ip", "addr", "add", c.addr, "dev", c.dev).CombinedOutput(); err != nil {
			t.Fatalf("ip addr add %s: %v\n%s", c.addr, err, out)
		}
	}
	const mgmt = "10.100.9.2"
	listener := startSSHD(t, h, dir, "h1", mgmt)
	waitSSHD(t, ctl, dir, "h1", mgmt)
	before := h.Snapshot(t, "up0")

	// The change: what lowlat applies, and then sshd's listener ends. The
	// wrapper is the role's lowlat_binary; every other call is lowlat's.
	journal := filepath.Join(dir, "journal")
	wrapper := filepath.Join(dir, "lowlat-then-no-new-ssh")
	script := fmt.Sprintf("#!/bin/sh\n%s \"$@\"\nrc=$?\nif [ \"$1\" = apply ] && [ $rc = 0 ]; then kill -TERM %d; fi\nexit $rc\n", bin, listener.Pid)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	inv := filepath.Join(dir, "inventory.yml")
	if err := os.WriteFile(inv, []byte(fmt.Sprintf(`lowlat:
  hosts:
    h1:
      ansible_host: %s
  vars:
    ansible_user: root
    ansible_ssh_private_key_file: %s
    ansible_python_interpreter: /usr/bin/python3
    lowlat_binary: %s
    lowlat_journal: %s
    lowlat_profile: capped-uplink
    lowlat_set:
      rate: 2mbit
      down: 20mbit
    lowlat_confirm: 15s
    lowlat_canary_judge: false
`, mgmt, filepath.Join(dir, "id"), wrapper, journal)), 0o600); err != nil {
		t.Fatal(err)
	}

	// Ansible's default SSH options, ControlPersist included, with the
	// control sockets in the test's directory.
	cp := filepath.Join(dir, "cp")
	cmd := ctl.Command("ansible-playbook", "-i", inv, "lowlat.lowlat.canary")
	cmd.Env = append(cmd.Env, ansibleEnv(dir)...)
	cmd.Env = append(cmd.Env,
		"ANSIBLE_SSH_ARGS=-C -o ControlMaster=auto -o ControlPersist=60s -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no",
		"ANSIBLE_SSH_CONTROL_PATH_DIR="+cp,
		"ANSIBLE_TIMEOUT=5",
	)
	t.Cleanup(func() { endMasters(t, cp) })
	// The output goes to a file: a persistent master may hold a pipe open.
	outFile, err := os.Create(filepath.Join(dir, "play.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer outFile.Close()
	cmd.Stdout, cmd.Stderr = outFile, outFile
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(3*time.Minute, func() { cmd.Process.Kill() })
	err = cmd.Wait()
	timer.Stop()
	b, _ := os.ReadFile(outFile.Name())
	out := string(b)
	t.Logf("ansible-playbook: %v in %v, recap %+v:\n%s", err, time.Since(start).Round(100*time.Millisecond), recap(out)["h1"], out)
	if err == nil {
		t.Errorf("the play passed although new connections to h1 fail:\n%s", out)
	}
	if s := recap(out)["h1"]; s.Unreachable+s.Failures == 0 || s.Changed == 0 {
		t.Errorf("h1: recap %+v, want the change applied and the confirm unreachable:\n%s", s, out)
	}

	// Not confirmed: the change waits for its deadline, then rolls back.
	var st struct {
		Active []struct {
			ID        string     `json:"id"`
			ConfirmBy *time.Time `json:"confirm_by"`
			Confirmed bool       `json:"confirmed"`
		} `json:"active"`
	}
	o, _ := runCmd(t, h.Command(bin, "status", "--json", "--journal", journal))
	if err := json.Unmarshal([]byte(o), &st); err != nil || len(st.Active) != 1 || st.Active[0].ConfirmBy == nil {
		t.Fatalf("status after the play: want one transaction awaiting confirmation:\n%s\nplay:\n%s", o, out)
	}
	if st.Active[0].Confirmed {
		t.Fatalf("%s was confirmed over a connection opened before the change, although new connections to h1 fail:\n%s", st.Active[0].ID, out)
	}
	deadline := *st.Active[0].ConfirmBy
	for {
		o, _ := runCmd(t, h.Command(bin, "status", "--json", "--journal", journal))
		if json.Unmarshal([]byte(o), &st) == nil && len(st.Active) == 0 {
			break
		}
		if time.Now().After(deadline.Add(20 * time.Second)) {
			t.Fatalf("still in force 20 s after its deadline:\n%s", o)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if got := h.Snapshot(t, "up0"); got != before {
		t.Errorf("not restored by the dead-man switch:\n%s", testnet.DiffLines(before, got))
	}
}

// endMasters ends the SSH control masters this test's plays left behind
// (ControlPersist keeps them a minute): each is an ssh whose command line
// names a control socket in dir.
func endMasters(t *testing.T, dir string) {
	masters := pidsWhere(func(args []string) bool {
		// A master retitles itself "ssh: CONTROL-PATH [mux]".
		return (filepath.Base(args[0]) == "ssh" || strings.HasPrefix(args[0], "ssh: ")) && strings.Contains(strings.Join(args, "\x00"), dir+"/")
	})
	for _, pid := range masters {
		if err := syscall.Kill(pid, syscall.SIGTERM); err == nil {
			t.Logf("ended SSH control master %d", pid)
		}
	}
}
