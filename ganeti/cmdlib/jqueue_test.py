"""OP_TEST_JQUEUE's names, shared by its LU (L{ganeti.cmdlib.test}) and C{gnt-debug test-jobqueue}
(which must not import the LUs to know them)."""

#: OP_TEST_JQUEUE's test names (Ganeti's C{JQT_*}), sent in C{jqueue-test} log entries
JQT_EXPANDNAMES = "expandnames"
JQT_EXEC = "exec"
JQT_STARTMSG = "startmsg"
JQT_LOGMSG = "logmsg"
#: the prefix of OP_TEST_JQUEUE's test messages in the job log
JQT_MSGPREFIX = "TESTMSG="
