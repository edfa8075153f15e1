"""The gnt-* command-line tools and the machinery they share.

One module per tool (L{gnt_job}, L{gnt_debug}, L{gnt_cluster},
L{gnt_group}, L{gnt_node}, L{gnt_instance}, L{gnt_os}, L{gnt_backup}),
each a dict of subcommands run by L{runner.run}.  What they share:

  - L{command}: a subcommand (L{command.Command}), the L{command.Context}
    it runs with, the exit statuses;
  - L{options}: the shared options, argparse types and the subcommand parser;
  - L{runner}: running a tool (parse, run, print errors, log the command);
  - L{errorfmt}: errors printed as Ganeti prints them;
  - L{jobs}: opcodes, submitting jobs and following them, one or many;
  - L{formatting}: tables, units, times, nested information;
  - L{queries}: the list and list-fields commands;
  - L{tags}: the tag commands;
  - L{prompt}: asking the user.

Code imports these modules directly; there is no facade re-exporting
their names (Ganeti's C{ganeti.cli} has no counterpart here).
"""
