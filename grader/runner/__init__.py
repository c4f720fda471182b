"""What runs beside learner code, in the child process: no reference code, no expected values.

The judge (the pytest process) sends requests; a worker forked from the zygote imports the
submission, runs the request and sends back tensors and plain data (protocol.py).
"""
