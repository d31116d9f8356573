-- Placeholder on branch pending only, so that 0005_pending applies on this branch (versions must
-- have no gaps). The sagas branch owns this version: at merge, take its file and drop this one.
SELECT 1;
