DROP TABLE reckon_callback_signatures;
DROP TABLE reckon_callback_keys;
