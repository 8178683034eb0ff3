#!/bin/sh
# lowlat's prerm (deb: remove, upgrade, deconfigure, failed-upgrade) and
# %preun (rpm: 0 erase, 1 upgrade).
#
# On removal (not on upgrade): stop the daemons that run the binary being
# removed, the monitor and every autorate instance (an instance that stops
# puts its shaper back to the policy's base rate), disable the monitor, and
# say which transactions stay in force and how to roll them back. The host's
# tuning is left exactly as it is: a package manager is no place to undo a
# change behind the operator's back. 'lowlat __removing' also leaves a
# marker in /var/lib/lowlat that postrm purge reads after the binary is gone.
set -e
case "$1" in
remove | 0)
	if [ -d /run/systemd/system ]; then
		# Debian's deb-systemd-invoke asks policy-rc.d first; rpm's systems
		# have only systemctl.
		if command -v deb-systemd-invoke >/dev/null 2>&1; then
			deb-systemd-invoke stop lowlat-monitor.service 'lowlat-autorate@*.service' >/dev/null || true
		else
			systemctl stop lowlat-monitor.service 'lowlat-autorate@*.service' >/dev/null 2>&1 || true
		fi
		systemctl disable lowlat-monitor.service >/dev/null 2>&1 || true
	fi
	if command -v lowlat >/dev/null 2>&1; then
		lowlat __removing || true
	fi
	;;
esac
exit 0
