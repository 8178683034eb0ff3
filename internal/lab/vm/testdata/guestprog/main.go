// Command guestprog runs inside the test VM of TestIntegrationVMBoots: with the
// host's iproute2 copied in, it creates a netem and an fq_codel qdisc (which
// proves the modules loaded), writes what tc shows and its arguments under
// /out, and exits 7 so the test can check exit-code propagation.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

func run(args ...string) {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	fmt.Printf("guestprog: %s: ok %s\n", strings.Join(args, " "), strings.TrimSpace(string(out)))
	if err != nil {
		fmt.Printf("guestprog: %s: %v\n", strings.Join(args, " "), err)
		os.Exit(3)
	}
}

func main() {
	run("/usr/sbin/ip", "link", "add", "d0", "type", "dummy")
	run("/usr/sbin/ip", "link", "add", "d1", "type", "dummy")
	run("/usr/sbin/tc", "qdisc", "add", "dev", "d0", "root", "netem", "delay", "10ms")
	run("/usr/sbin/tc", "qdisc", "add", "dev", "d1", "root", "fq_codel")
	show, err := exec.Command("/usr/sbin/tc", "qdisc", "show").CombinedOutput()
	if err != nil {
		fmt.Printf("guestprog: tc qdisc show: %v\n", err)
		os.Exit(3)
	}
	mods, _ := os.ReadFile("/proc/modules")
	if err := os.MkdirAll("/out/sub", 0o755); err != nil {
		fmt.Println("guestprog:", err)
		os.Exit(3)
	}
	files := map[string]string{
		"/out/qdisc.txt":   string(show),
		"/out/modules.txt": string(mods),
		"/out/sub/args.txt": strings.Join(os.Args[1:], "\n") + "\n" +
			"LOWLAT_TEST_VAR=" + os.Getenv("LOWLAT_TEST_VAR") + "\n",
	}
	for name, data := range files {
		if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
			fmt.Println("guestprog:", err)
			os.Exit(3)
		}
	}
	fmt.Println("guestprog: done")
	os.Exit(7)
}
