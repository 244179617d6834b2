"""check-planned-vs-simulated.py PLAN.json SIM.json TOL: the planner's chosen
step time (merak-compile --devices --report=json) within TOL (relative) of
the compiled program's simulated step (--simulate --report=json)."""
import json
import sys

planned = json.load(open(sys.argv[1]))["planner"]["chosen"]["step_time_s"]
simulated = json.load(open(sys.argv[2]))["simulated"]["step_time_s"]
tol = float(sys.argv[3])
rel = abs(planned - simulated) / simulated
assert rel <= tol, "planned %.4e s, simulated %.4e s: %.3f apart" % (planned, simulated, rel)
print("planned within %g of simulated (%.4e vs %.4e s)" % (tol, planned, simulated))
