-- reckon_pick(choose_first, first, second): CASE WHEN choose_first THEN first ELSE second END, as a
-- function. Citus refuses an UPDATE whose CASE or COALESCE holds a function that is not IMMUTABLE
-- (`CASE … ELSE now() END`), but accepts now() as the argument of an IMMUTABLE function (it
-- evaluates it once, on the coordinator). PL/pgSQL so that no planner inlines it back into a CASE
-- (Citus checks after inlining a SQL function); it costs a function call per row, so it serves the
-- statements that touch few rows (taking jobs over, marking a reactor dead). Pure, so IMMUTABLE.
CREATE FUNCTION reckon_pick(choose_first boolean, first timestamptz, second timestamptz)
RETURNS timestamptz LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN CASE WHEN choose_first THEN first ELSE second END;
END
$$;
