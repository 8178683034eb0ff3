#!/usr/bin/python3
"""ansible-test, with its sanity tests' requirements taken from the system.

ansible-test gives each sanity test a virtual environment of its own and
pip-installs pinned requirements into it from PyPI. Where PyPI cannot be
reached, those tests (ansible-doc, import, pep8, pylint, runtime-metadata,
validate-modules, yamllint) stop before they start. This runs ansible-test
unchanged but for two of its functions, the ones that make and fill those
environments:

- an environment sees the system's site packages (Debian's pylint, yamllint,
  python3-voluptuous, python3-pycodestyle, ...), and pip installs nothing;
- except the import test's: it checks that a module imports in an
  environment holding only Ansible and the few packages ansible-test lists,
  so it gets exactly those, linked from the system's copies. A module that
  imports a library the hosts may lack still fails it.

Run it as ansible-test, with the distribution's Python (the one Debian's
ansible-core and these packages are installed for):

    cd .../ansible_collections/NS/NAME
    /usr/bin/python3 ansible_test_offline.py sanity --python-interpreter /usr/bin/python3

The checks run with the distribution's versions of the tools, not with
ansible-test's pins. A requirement the system lacks fails the run, naming it.
"""

import importlib.metadata
import os
import re
import sys

from ansible_test._internal import main
from ansible_test._internal.commands import sanity
from ansible_test._internal.python_requirements import PipInstall

create_virtual_environment = sanity.create_virtual_environment

# The environments that must not see the system's packages: the import
# test's, and the one ansible-test gives tests with no requirements (the
# import test runs the modules in it).
ISOLATED = re.compile(r'^sanity(\.import(\..*)?)?$')


def venv_label(path):
    """ansible-test's name for the environment at path: .../venv/LABEL/X.Y/HASH."""
    return os.path.basename(os.path.dirname(os.path.dirname(path)))


def create_venv(args, python, path, system_site_packages=False, pip=False):
    """Create the environment ansible-test asks for, seeing the system's packages unless isolated."""
    isolated = bool(ISOLATED.match(venv_label(path)))
    return create_virtual_environment(args, python, path, system_site_packages=system_site_packages or not isolated, pip=pip)


def requirement_names(commands):
    """The distribution names the pip commands would install."""
    names = []
    for command in commands:
        if not isinstance(command, PipInstall):
            continue
        lines = list(command.packages)
        for _path, contents in command.requirements:
            lines += contents.splitlines()
        for line in lines:
            m = re.match(r'\s*([A-Za-z0-9][A-Za-z0-9._-]*)', line.split('#', 1)[0])
            if m:
                names.append(m.group(1))
    return names


def link_distribution(name, site):
    """Make the system's copy of distribution name importable in the site directory."""
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise SystemExit('ansible_test_offline: %s: not installed on this system (ansible-test needs it; install its distribution package)' % name)
    meta = str(dist._path)  # pylint: disable=protected-access
    system = os.path.dirname(meta)
    tops = set((dist.read_text('top_level.txt') or '').split())
    for f in dist.files or []:
        if not f.parts[0].startswith('..') and not f.parts[0].endswith(('.dist-info', '.egg-info')) and f.parts[0] != '__pycache__':
            tops.add(f.parts[0].split('.')[0])
    entries = [os.path.basename(meta)]
    for entry in os.listdir(system):
        if entry.split('.')[0] in tops:
            entries.append(entry)
    for entry in entries:
        dst = os.path.join(site, entry)
        if not os.path.lexists(dst):
            os.symlink(os.path.join(system, entry), dst)


def install(_args, python, commands, _connection):
    """pip install, offline: nothing where the system's packages are visible, links where isolated."""
    venv = os.path.dirname(os.path.dirname(python.path))
    if not ISOLATED.match(venv_label(venv)):
        return
    site = os.path.join(venv, 'lib', 'python%d.%d' % sys.version_info[:2], 'site-packages')
    for name in requirement_names(commands):
        link_distribution(name, site)


sanity.create_virtual_environment = create_venv
sanity.run_pip = install

if __name__ == '__main__':
    sys.exit(main())
