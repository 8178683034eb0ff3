package host

import (
	"fmt"
	"strconv"
	"syscall"
)

// interrupts reads /proc/interrupts and each numbered IRQ's affinity and node.
func (rd *fileReader) interrupts() {
	b, ok := rd.read("/proc/interrupts")
	if !ok {
		return
	}
	irqs, err := parseInterrupts(b)
	if err != nil {
		rd.fail("/proc/interrupts", err)
		return
	}
	for i := range irqs {
		q := &irqs[i]
		if q.Num < 0 {
			continue
		}
		dir := "/proc/irq/" + strconv.Itoa(q.Num)
		// smp_affinity_list is missing for per-CPU interrupts on some arches;
		// reading it fails with EIO for IRQs that cannot be moved.
		if b, ok := rd.readItem(dir+"/smp_affinity_list", "/proc/irq/*/smp_affinity_list", syscall.EIO); ok {
			if l, err := ParseCPUList(string(b)); err == nil {
				q.Affinity = l
			} else {
				rd.failGroup("/proc/irq/*/smp_affinity_list", err)
			}
		}
		// effective_affinity_list exists since 4.13 where the irqchip has one.
		if b, ok := rd.readItem(dir+"/effective_affinity_list", "/proc/irq/*/effective_affinity_list", syscall.EIO); ok {
			if l, err := ParseCPUList(string(b)); err == nil {
				q.EffectiveAffinity = l
			} else {
				rd.failGroup("/proc/irq/*/effective_affinity_list", err)
			}
		}
		if b, ok := rd.readItem(dir+"/node", "/proc/irq/*/node"); ok {
			if n, err := atoiTrim(b); err == nil {
				q.Node = n
			}
		}
	}
	rd.f.IRQs = irqs
}

func (rd *fileReader) softirqs() {
	b, ok := rd.read("/proc/softirqs")
	if !ok {
		return
	}
	m, err := parseSoftirqs(b)
	if err != nil {
		rd.fail("/proc/softirqs", err)
		return
	}
	rd.f.SoftIRQs = m
}

// softnet reads /proc/net/softnet_stat; rows of kernels before 5.10 carry no
// CPU id and are matched to online CPUs in order, which is how the kernel
// prints them.
func (rd *fileReader) softnet() {
	const p = "/proc/net/softnet_stat"
	b, ok := rd.read(p)
	if !ok {
		return
	}
	rows, err := parseSoftnet(b)
	if err != nil {
		rd.fail(p, err)
		return
	}
	for i := range rows {
		if rows[i].CPU >= 0 {
			continue
		}
		if i < len(rd.online) {
			rows[i].CPU = rd.online[i]
		} else {
			rows[i].CPU = i
		}
	}
	rd.f.Softnet = rows
}

func (rd *fileReader) snmp() {
	m := map[string]map[string]int64{}
	for _, p := range []string{"/proc/net/snmp", "/proc/net/netstat"} {
		b, ok := rd.read(p)
		if !ok {
			continue
		}
		if err := parseSNMP(b, m); err != nil {
			rd.fail(p, fmt.Errorf("parse: %w", err))
		}
	}
	if len(m) > 0 {
		rd.f.SNMP = m
	}
}
