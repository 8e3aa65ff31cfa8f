from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from .selectors import project_list_for


@login_required
def home(request):
    return render(request, "home.html", {"projects": project_list_for(user=request.user)})
