# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lowlat maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The options every module passes on to the lowlat binary.
    DOCUMENTATION = r'''
options:
  binary:
    description: The lowlat binary (a name on PATH or an absolute path).
    type: str
    default: lowlat
  journal:
    description: lowlat's journal (default C(/var/lib/lowlat/journal)).
    type: path
'''

    # The binary alone, for modules that never read the journal.
    BINARY = r'''
options:
  binary:
    description: The lowlat binary (a name on PATH or an absolute path).
    type: str
    default: lowlat
'''
