ALTER TABLE reckon_effects DROP COLUMN inconclusive_checks;
