"""LuxiD: the LUXI server, the job queue and job scheduling of the master."""
