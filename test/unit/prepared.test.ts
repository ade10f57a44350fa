// Placeholders of the prepared hot-path statements: numbered in order, never inside quotes.
import t from "tap";
import { numberPlaceholders } from "../../services/platform/prepared.ts";

t.equal(numberPlaceholders("select ? , ?"), "select $1 , $2");
t.equal(numberPlaceholders("select nextval('seq?') from t where a = ? and \"col?\" = ?"), "select nextval('seq?') from t where a = $1 and \"col?\" = $2");
t.equal(numberPlaceholders("select 'it''s ?', ?"), "select 'it''s ?', $1", "a doubled quote inside a string");
t.equal(numberPlaceholders("no placeholders"), "no placeholders");
