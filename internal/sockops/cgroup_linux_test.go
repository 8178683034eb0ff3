package sockops

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServiceCgroup finds a system service's cgroup in trees laid out as
// systemd lays them out, with a user's service manager and a container
// running units of the same name in cgroups delegated to them.
func TestServiceCgroup(t *testing.T) {
	const svc = "gw.service"
	user := "user.slice/user-1000.slice/user@1000.service/" + svc
	userApp := "user.slice/user-1000.slice/user@1000.service/app.slice/" + svc
	container := "system.slice/docker-4f1c.scope/system.slice/" + svc
	machine := "machine.slice/machine-web.scope/payload/system.slice/" + svc
	for _, tt := range []struct {
		name string
		dirs []string
		want string // "" for not found
	}{
		{"in system.slice", []string{"system.slice/" + svc, user}, "system.slice/" + svc},
		{"in a slice of its own", []string{"workload.slice/" + svc, user}, "workload.slice/" + svc},
		{"in a nested slice", []string{"system.slice/system-gw.slice/" + svc}, "system.slice/system-gw.slice/" + svc},
		{"in the root slice", []string{svc}, svc},
		{"only a user's", []string{user}, ""},
		{"only a user's, in its app.slice", []string{userApp}, ""},
		{"only a container's", []string{container, machine}, ""},
		{"a user's, then the system's in a later slice", []string{user, "zz.slice/" + svc}, "zz.slice/" + svc},
		{"not running", []string{"system.slice/other.service"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for _, d := range tt.dirs {
				if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			got, err := serviceCgroup(root, svc)
			if tt.want == "" {
				if err == nil || !errors.Is(err, errNoCgroup) || !strings.Contains(err.Error(), "unknown service "+svc) {
					t.Errorf("found %q (%v), want unknown service", got, err)
				}
				return
			}
			if want := filepath.Join(root, tt.want); got != want || err != nil {
				t.Errorf("got %q, %v; want %q", got, err, want)
			}
		})
	}
}

// TestIntegrationCgroupOfSkipsUserManagers: in the host's cgroup v2
// hierarchy, a user's service manager running a unit of the name asked
// for is not the system service: CgroupOf says it is not running, and
// finds the system one once it runs in a slice.
func TestIntegrationCgroupOfSkipsUserManagers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	root, err := Cgroup2Root()
	if err != nil {
		t.Fatal(err)
	}
	// Slices of the test's own, so nothing of the host is touched.
	id := time.Now().UnixNano()
	svc := fmt.Sprintf("lowlat-test-%d.service", id)
	slice := filepath.Join(root, fmt.Sprintf("lowlat-test-%d.slice", id))
	user := filepath.Join(slice, "user@4242.service")
	var made []string
	mkdir := func(d string) {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		made = append(made, d)
	}
	t.Cleanup(func() {
		for i := len(made) - 1; i >= 0; i-- {
			os.Remove(made[i])
		}
	})
	mkdir(slice)
	mkdir(user)
	mkdir(filepath.Join(user, svc))
	if dir, err := CgroupOf(Selector{Service: svc}); err == nil {
		t.Errorf("service:%s: picked the user manager's %s, want not running", svc, dir)
	} else if !strings.Contains(err.Error(), "unknown service "+svc) {
		t.Errorf("service:%s: %v, want unknown service", svc, err)
	}
	sys := filepath.Join(slice, svc)
	mkdir(sys)
	if dir, err := CgroupOf(Selector{Service: svc}); dir != sys || err != nil {
		t.Errorf("service:%s: %q, %v; want %s", svc, dir, err, sys)
	}
}
