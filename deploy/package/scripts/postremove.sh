#!/bin/sh
# lowlat's postrm (deb: remove, purge, upgrade, ...) and %postun (rpm: 0
# erase, 1 upgrade).
#
# purge removes lowlat's state, except the journal of transactions that are
# still in force: it is the only record of what the host had before, and a
# reinstalled lowlat rolls them back from it. Then the purge warns loudly and
# keeps /var/lib/lowlat. rpm has no purge: the journal stays on erase.
#
# rpm's upgrade restarts the monitor and the autorate instances that run
# here, with the new files in place (%systemd_postun_with_restart); Debian's
# does it in postinst.
set -e
state=/var/lib/lowlat
case "$1" in
purge)
	if [ -s "$state/in-force-at-removal" ]; then
		echo "########################################################################" >&2
		echo "lowlat: WARNING: purge keeps $state: these transactions are still in force:" >&2
		sed 's/^/lowlat:     /' "$state/in-force-at-removal" >&2
		echo "lowlat: the host keeps lowlat's tuning. To undo it: reinstall lowlat, then" >&2
		echo "lowlat:     lowlat rollback --all" >&2
		echo "lowlat: then purge again. Deleting $state loses the only record of the" >&2
		echo "lowlat: values the host had before." >&2
		echo "########################################################################" >&2
	else
		rm -rf "$state"
	fi
	rmdir /etc/lowlat 2>/dev/null || true
	;;
esac
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
	case "$1" in
	[1-9]*)
		systemctl try-restart lowlat-monitor.service 'lowlat-autorate@*.service' >/dev/null 2>&1 || true
		;;
	esac
fi
exit 0
