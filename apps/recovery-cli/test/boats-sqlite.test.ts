// The Boat commands' suite (boats-suite.ts) on the sqlite backend (<dataDir>/drydock.sqlite).
import { boatsSuite } from "./boats-suite.js";

boatsSuite("sqlite");
