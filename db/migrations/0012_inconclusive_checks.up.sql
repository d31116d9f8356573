-- How many inconclusive status checks an UNKNOWN effect has had (effects/reconcile.go). The
-- connector's StatusCheckLimit is compared with this count, not with the attempt number of the
-- reconcile job: a run of that job whose answer was never recorded — its reactor died, or the
-- write failed — asked nothing as far as the effect is concerned. Each inconclusive answer adds one
-- in the transaction that records it (the last one together with the move to STUCK); the count
-- starts over when the effect goes back to PENDING.
ALTER TABLE reckon_effects
    ADD COLUMN inconclusive_checks integer NOT NULL DEFAULT 0 CHECK (inconclusive_checks >= 0);
