"""The executor: carries out file, process and tool operations next to the files.

Standard-library only. Inside a Docker workspace it runs as the container's
main program (started by ``bundle.bootstrap_command``) and speaks the
line protocol of ``wire`` on its stdin/stdout; for the local backend the
same ``Executor`` object is called in-process. There is no second copy of
any operation anywhere.
"""
