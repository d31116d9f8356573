-- Placeholder in branch httpconn only: the migration numbers before 0007_connectors are reserved
-- for other branches (turns), and db.Migrations refuses gaps. At merge, the real file replaces this
-- one.
SELECT 1;
