-- The floor of every statement: one round trip to PostgreSQL.
SELECT 1;
