// Public ids: a prefix and 24 base62 characters, one at a time or several from one draw.
import t from "tap";
import { newId, newIds } from "../../services/platform/ids.ts";

const shape = /^wd_[0-9A-Za-z]{24}$/;
t.match(newId("wd"), shape);
const many = newIds("wd", 16);
t.equal(many.length, 16);
t.ok(many.every((id) => shape.test(id)), "each has the shape of newId's");
t.equal(new Set([...many, ...newIds("wd", 16)]).size, 32, "all distinct");
t.same(newIds("wd", 0), []);
